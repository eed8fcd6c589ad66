# The cohort's JupyterHub: a login per participant and a notebook server (a pod, from KubeSpawner)
# per participant, with that participant's attn token and nobody else's.
#
# The same file runs in the cluster (deploy/jupyterhub: the hub Deployment mounts it from the
# ConfigMap attn-hub-config) and in CI (tests/deploy/jupyterhub_live.py loads it unchanged and
# swaps only the spawner for a local one). Everything that differs between the two comes from
# the environment the hub Deployment sets:
#
#   ATTN_HUB_PUBLIC_PORT      HTTPS port of the proxy (the participants' browsers)     8443
#   ATTN_HUB_REDIRECT_PORT    plain-HTTP port that only redirects to HTTPS             8080
#   ATTN_HUB_REDIRECT_TO      the port the redirect names (the load balancer's)         443
#   ATTN_HUB_API_PORT         the hub's own port (notebook servers report to it)       8081
#   ATTN_HUB_PROXY_API_PORT   the proxy's API, on loopback inside the hub's pod        8001
#   ATTN_HUB_CONNECT_URL      how notebook servers reach the hub (its Service)
#   ATTN_HUB_TLS_DIR          tls.crt and tls.key of the public side (Secret attn-hub-tls)
#   ATTN_HUB_DATA_DIR         the hub's database and cookie secret (a volume)
#   ATTN_HUB_PARTICIPANTS     participants.txt of scripts/mint-tokens.sh (ConfigMap
#                             attn-hub-participants): who has a token, who hosts
#   ATTN_HUB_IDLE_TIMEOUT_S   an idle notebook server is stopped after this long       3600
#   ATTN_NOTEBOOK_IMAGE       the notebook image, by digest (set by the overlay's images:)
#   ATTN_TARGET, ATTN_TLS_CA_FILE
#                             handed to every notebook server as they are
import os
import pathlib
import sys

c = get_config()  # noqa: F821  (JupyterHub's config loader defines it)


def env(name, default=None):
    value = os.environ.get(name, default)
    if value is None:
        raise SystemExit(f"jupyterhub_config.py: ${name} is not set (deploy/jupyterhub/hub.yaml sets it)")
    return value


PARTICIPANTS = pathlib.Path(env("ATTN_HUB_PARTICIPANTS", "/etc/attn/participants/participants.txt"))


def participants():
    """{name: role} from scripts/mint-tokens.sh's participants.txt ("NAME ROLE" lines), read on
    every use: a participant the host adds later needs no hub restart."""
    out = {}
    for line in PARTICIPANTS.read_text().splitlines():
        words = line.split()
        if words and not words[0].startswith("#"):
            out[words[0]] = words[1] if len(words) > 1 else "participant"
    return out


# --- the public side: HTTPS only --------------------------------------------------------------
# configurable-http-proxy runs beside the hub (the hub starts it) and terminates TLS with the
# certificate the host provides; a second port answers plain HTTP with a redirect to HTTPS.
tls_dir = pathlib.Path(env("ATTN_HUB_TLS_DIR", "/etc/attn/hub-tls"))
c.JupyterHub.bind_url = f"https://:{env('ATTN_HUB_PUBLIC_PORT', '8443')}"
c.JupyterHub.ssl_cert = str(tls_dir / "tls.crt")
c.JupyterHub.ssl_key = str(tls_dir / "tls.key")
c.ConfigurableHTTPProxy.command = [
    "configurable-http-proxy",
    "--redirect-port", env("ATTN_HUB_REDIRECT_PORT", "8080"),
    "--redirect-to", env("ATTN_HUB_REDIRECT_TO", "443"),
]
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{env('ATTN_HUB_PROXY_API_PORT', '8001')}"
c.JupyterHub.hub_bind_url = f"http://:{env('ATTN_HUB_API_PORT', '8081')}"
c.JupyterHub.hub_connect_url = env("ATTN_HUB_CONNECT_URL", "http://attn-hub.attn-cohort.svc.cluster.local:8081")
data_dir = pathlib.Path(env("ATTN_HUB_DATA_DIR", "/srv/jupyterhub"))
c.JupyterHub.db_url = f"sqlite:///{data_dir / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(data_dir / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.pid_file = str(data_dir / "proxy.pid")
c.JupyterHub.cleanup_servers = False  # a hub restart leaves the participants' servers running

# --- logins ------------------------------------------------------------------------------------
# NativeAuthenticator: a participant signs up at /hub/signup with the name the host handed out
# and a password of their own; the host approves each sign-up at /hub/authorize, so nobody takes
# a name that is not theirs. Works with no internet. For a cohort with GitHub accounts, use
# OAuthenticator instead (README, "A notebook server per participant"):
#   c.JupyterHub.authenticator_class = "github"
#   c.GitHubOAuthenticator.oauth_callback_url = "https://HUB_ADDRESS/hub/oauth_callback"
#   c.GitHubOAuthenticator.client_id / client_secret from the GitHub OAuth app
#   c.GitHubOAuthenticator.allowed_users = set(participants())  (names = GitHub logins, minted)
c.JupyterHub.authenticator_class = "native"
c.NativeAuthenticator.open_signup = False
c.NativeAuthenticator.minimum_password_length = 10
c.NativeAuthenticator.check_common_password = True
c.NativeAuthenticator.allowed_failed_logins = 5
c.NativeAuthenticator.seconds_before_next_try = 60
# Whoever the host approves may log in; the approval is the gate.
c.Authenticator.allow_all = True
# The hosts (the tokens file's admins) sign up without an approval; they sign up first, right
# after the deployment and before the hub's address is handed out.
hosts = {name for name, role in participants().items() if role == "admin"}
c.Authenticator.allowed_users = hosts

# The hosts get the admin page (/hub/admin) and the sign-up approvals, start and stop anyone's
# server, but not JupyterHub's admin role: they cannot open a participant's server, so no
# participant's notebook or token is visible to them either.
c.JupyterHub.load_roles = [
    {
        "name": "workshop-host",
        "description": "runs the workshop: approves sign-ups, sees and stops servers",
        "scopes": ["admin-ui", "admin:users", "admin:servers", "list:users", "read:users", "read:servers",
                   "read:users:activity"],
        "users": sorted(hosts),
    },
    {
        # The idle culler (below): sees activity, stops idle servers.
        "name": "idle-culler",
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
        "services": ["idle-culler"],
    },
]

# --- idle servers --------------------------------------------------------------------------------
# jupyterhub-idle-culler stops a server nobody has used for ATTN_HUB_IDLE_TIMEOUT_S, which frees
# its pod (its home volume stays: the next login finds the notebooks where they were).
idle_timeout = int(env("ATTN_HUB_IDLE_TIMEOUT_S", "3600"))
c.JupyterHub.services = [
    {
        "name": "idle-culler",
        "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={idle_timeout}",
                    f"--cull-every={max(10, idle_timeout // 6)}"],
    },
]

# --- the notebook servers ---------------------------------------------------------------------
# What every spawner gets (the local one in CI too): the command, what the server opens first,
# the attn service's address and CA, and a refusal for a participant without a token.
c.Spawner.cmd = ["jupyterhub-singleuser"]
c.Spawner.default_url = "/lab/tree/codelab.ipynb"
c.Spawner.start_timeout = 300  # the first start on a node pulls the notebook image
c.Spawner.http_timeout = 120
notebook_env = {
    "ATTN_TARGET": env("ATTN_TARGET"),
    "ATTN_TLS_CA_FILE": env("ATTN_TLS_CA_FILE"),
    "MPLCONFIGDIR": "/tmp/matplotlib",
}
c.Spawner.environment = notebook_env


def require_token(spawner):
    """A server starts only for a name the host minted a token for (its Secret exists)."""
    name = spawner.user.name
    if name not in participants():
        raise ValueError(f"no attn token was minted for '{name}': ask the host to run "
                         f"scripts/mint-tokens.sh DIR {name} and apply what it writes")


c.Spawner.pre_spawn_hook = require_token

# KubeSpawner: one pod per participant in this namespace (the cohort's), under its quota,
# LimitRange and NetworkPolicies (deploy/jupyterhub/networkpolicy.yaml admits the hub alone to
# the pod; the pod reaches DNS, attn-server's gRPC port and the hub's API only).
c.JupyterHub.spawner_class = "kubespawner.KubeSpawner"
c.KubeSpawner.image = env("ATTN_NOTEBOOK_IMAGE", "attn-notebook")
c.KubeSpawner.image_pull_policy = "IfNotPresent"
# KubeSpawner labels the pods app.kubernetes.io/component: singleuser-server, which the
# NetworkPolicies select (its own app.kubernetes.io/name: jupyterhub wins over extra_labels).
c.KubeSpawner.extra_labels = {"app.kubernetes.io/part-of": "attn"}
# Each participant's token, from the Secret attn-token-NAME that scripts/mint-tokens.sh writes:
# the kubelet puts it in this pod's environment; the hub itself never reads it.
c.KubeSpawner.environment = {
    **notebook_env,
    "ATTN_TOKEN": {"valueFrom": {"secretKeyRef": {"name": "attn-token-{username}", "key": "token"}}},
}
# Pod Security "restricted": the image's user, no privilege, a read-only root; the participant
# writes to their home volume and /tmp.
c.KubeSpawner.uid = 10001
c.KubeSpawner.gid = 10001
c.KubeSpawner.fs_gid = 10001
c.KubeSpawner.allow_privilege_escalation = False
c.KubeSpawner.pod_security_context = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
c.KubeSpawner.container_security_context = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
c.KubeSpawner.automount_service_account_token = False
c.KubeSpawner.service_account = None
c.KubeSpawner.extra_pod_config = {"enableServiceLinks": False}
# Sized for about 20 participants on the CPU pool's e2-standard-4 (README): the notebooks only
# send arrays and draw what comes back.
c.KubeSpawner.cpu_guarantee = 0.05
c.KubeSpawner.cpu_limit = 1
c.KubeSpawner.mem_guarantee = "384M"
c.KubeSpawner.mem_limit = "1536M"
c.KubeSpawner.extra_resource_guarantees = {"ephemeral-storage": "128Mi"}
c.KubeSpawner.extra_resource_limits = {"ephemeral-storage": "1Gi"}
# A home volume per participant (kept when the server stops), /tmp, and the cohort CA.
c.KubeSpawner.storage_pvc_ensure = True
c.KubeSpawner.pvc_name_template = "home-{username}"
c.KubeSpawner.storage_capacity = "1Gi"
c.KubeSpawner.storage_access_modes = ["ReadWriteOnce"]
c.KubeSpawner.volumes = [
    {"name": "home", "persistentVolumeClaim": {"claimName": "home-{username}"}},
    {"name": "tmp", "emptyDir": {"sizeLimit": "512Mi"}},
    {"name": "cohort-ca", "configMap": {"name": "attn-cohort-ca"}},
]
c.KubeSpawner.volume_mounts = [
    {"name": "home", "mountPath": "/home/jovyan"},
    {"name": "tmp", "mountPath": "/tmp"},
    {"name": "cohort-ca", "mountPath": os.path.dirname(env("ATTN_TLS_CA_FILE")), "readOnly": True},
]
