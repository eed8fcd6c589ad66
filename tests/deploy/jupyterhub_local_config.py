# CI's stand-in for the cluster (tests/deploy/jupyterhub_live.py): the deployed hub config,
# deploy/jupyterhub/jupyterhub_config.py, loaded unchanged, with the spawner swapped for a local
# one. What KubeSpawner and the kubelet do in the cluster is done here on this machine: the
# notebook server is a local process (jupyterhub-singleuser, in a home folder of its own) and
# its ATTN_TOKEN comes from that participant's Secret attn-token-NAME in the file
# scripts/mint-tokens.sh wrote, as the kubelet would put it into the pod.
import base64
import os

import yaml
from jupyterhub.spawner import SimpleLocalProcessSpawner

c = get_config()  # noqa: F821
load_subconfig(os.environ["ATTN_HUB_CONFIG"])  # noqa: F821


class SecretFileSpawner(SimpleLocalProcessSpawner):
    """A local process per participant, ATTN_TOKEN from Secret attn-token-NAME (none if absent)."""

    def get_env(self):
        env = super().get_env()
        with open(os.environ["ATTN_HUB_TOKEN_SECRETS"]) as f:
            secrets = {d["metadata"]["name"]: d for d in yaml.safe_load_all(f) if d}
        secret = secrets.get(f"attn-token-{self.user.name}")
        if secret:
            env["ATTN_TOKEN"] = base64.b64decode(secret["data"]["token"]).decode()
        return env


c.JupyterHub.spawner_class = SecretFileSpawner
c.SimpleLocalProcessSpawner.home_dir_template = os.environ["ATTN_HUB_HOMES"] + "/{username}"
if os.getuid() == 0:  # CI runs as root; Jupyter Server refuses root unless told
    c.Spawner.args = ["--allow-root"]
