# The codelab's variables (project_id, region, zone, cluster_name, machine_type, gpu_type,
# gpu_count) with the same names and meaning, then attn's own. Defaults: one g2-standard-8 node
# with one L4, the smallest shape that runs the service.

variable "project_id" {
  description = "GCP project ID"
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a GCP project ID: 6-30 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "region" {
  description = "GCP region; pick one with L4 quota (NVIDIA_L4_GPUS)"
  type        = string
  default     = "us-central1"

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must look like us-central1."
  }
}

variable "zone" {
  description = "GCP zone in region that offers L4 GPUs (us-central1: a, b or c; not f)"
  type        = string
  default     = "us-central1-a"

  validation {
    condition     = startswith(var.zone, "${var.region}-")
    error_message = "zone must be a zone of region (e.g. us-central1-a for us-central1)."
  }
}

variable "cluster_name" {
  description = "GKE cluster name (also the prefix of the network and service accounts)"
  type        = string
  default     = "attn-cluster"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,18}[a-z0-9]$", var.cluster_name))
    error_message = "cluster_name must be 2-20 lowercase letters, digits or hyphens, starting with a letter (service account IDs are derived from it)."
  }
}

variable "machine_type" {
  description = "Machine type of the GPU nodes: a G2 (L4) type; g2-standard-8, -12, -16 and -32 carry one L4, -24 two, -48 four, -96 eight"
  type        = string
  default     = "g2-standard-8"

  # Not g2-standard-4: its 4 vCPU and 16 GB cannot hold the Deployment's requests (4 CPU, 16 GiB).
  validation {
    condition     = contains(["g2-standard-8", "g2-standard-12", "g2-standard-16", "g2-standard-24", "g2-standard-32", "g2-standard-48", "g2-standard-96"], var.machine_type)
    error_message = "machine_type must be a G2 machine type of 8 vCPU or more (g2-standard-8, -12, -16, -24, -32, -48 or -96): the image is built for the L4 (sm_89), and the attn-server pod requests 4 CPU and 16 GiB, more than g2-standard-4 can give."
  }
}

variable "gpu_type" {
  description = "GPU accelerator type"
  type        = string
  default     = "nvidia-l4"

  validation {
    condition     = var.gpu_type == "nvidia-l4"
    error_message = "gpu_type must be nvidia-l4: the image's kernels are built for sm_89 only (CMAKE_CUDA_ARCHITECTURES=89 in the Dockerfile) and the Deployment selects L4 nodes."
  }
}

variable "gpu_count" {
  description = "GPUs per node; must be the number machine_type carries"
  type        = number
  default     = 1

  validation {
    condition = var.gpu_count == lookup({
      "g2-standard-8"  = 1,
      "g2-standard-12" = 1,
      "g2-standard-16" = 1,
      "g2-standard-24" = 2,
      "g2-standard-32" = 1,
      "g2-standard-48" = 4,
      "g2-standard-96" = 8,
    }, var.machine_type, -1)
    error_message = "gpu_count must match machine_type: g2-standard-8/12/16/32 carry 1 L4, g2-standard-24 carries 2, g2-standard-48 4, g2-standard-96 8."
  }
}

variable "gpu_node_count" {
  description = "Number of GPU nodes; run as many attn-server replicas (one per GPU)"
  type        = number
  default     = 1

  validation {
    condition     = var.gpu_node_count >= 0 && var.gpu_node_count <= 16 && floor(var.gpu_node_count) == var.gpu_node_count
    error_message = "gpu_node_count must be a whole number from 0 to 16."
  }
}

variable "gpu_driver_version" {
  description = "NVIDIA driver GKE installs on the GPU nodes: LATEST (R580 or newer on current GKE versions) or DEFAULT"
  type        = string
  # The image is CUDA 13.0 (Dockerfile), which needs an R580 driver. GKE's DEFAULT driver was still
  # R535 on current GKE versions in 2026, LATEST installs R580 or newer; see the README's CUDA note.
  default = "LATEST"

  validation {
    condition     = contains(["LATEST", "DEFAULT"], var.gpu_driver_version)
    error_message = "gpu_driver_version must be LATEST or DEFAULT (DEFAULT only where that GKE version's default driver is R580 or newer: the image needs CUDA 13.0)."
  }
}

variable "cpu_machine_type" {
  description = "Machine type of the small CPU pool (system and monitoring pods, Grafana)"
  type        = string
  default     = "e2-standard-4"

  validation {
    condition     = can(regex("^[a-z][a-z0-9]*-[a-z]+(-[0-9]+)?$", var.cpu_machine_type)) && !can(regex("^(a[0-9]|g[0-9])-", var.cpu_machine_type))
    error_message = "cpu_machine_type must be a general-purpose machine type such as e2-standard-4 (not an accelerator-optimized a2/a3/g2 type: this pool has no GPUs)."
  }
}

variable "cpu_node_count" {
  description = "Number of CPU nodes"
  type        = number
  default     = 1

  validation {
    condition     = var.cpu_node_count >= 1 && floor(var.cpu_node_count) == var.cpu_node_count
    error_message = "cpu_node_count must be a whole number, at least 1 (kube-system and the monitoring agents need a home off the GPU nodes)."
  }
}

variable "release_channel" {
  description = "GKE release channel"
  type        = string
  default     = "REGULAR"

  validation {
    condition     = contains(["RAPID", "REGULAR", "STABLE"], var.release_channel)
    error_message = "release_channel must be RAPID, REGULAR or STABLE (DCGM metrics need GKE 1.30.1 or later, which all three carry)."
  }
}

variable "artifact_repository_id" {
  description = "Artifact Registry (Docker) repository for the attn-server image"
  type        = string
  default     = "attn"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,62}$", var.artifact_repository_id))
    error_message = "artifact_repository_id must be lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "deletion_protection" {
  description = "Refuse `terraform destroy` of the cluster (off: a workshop cluster is meant to be torn down)"
  type        = bool
  default     = false
}

variable "enable_private_nodes" {
  description = "Nodes without public addresses: they pull images through Private Google Access and nothing on the internet reaches them"
  type        = bool
  default     = true
}

variable "master_ipv4_cidr_block" {
  description = "The control plane's private /28, for private nodes; must not overlap the subnets (10.20.0.0/22, 10.24.0.0/14, 10.28.0.0/20)"
  type        = string
  default     = "172.16.0.32/28"

  validation {
    condition     = can(cidrhost(var.master_ipv4_cidr_block, 0)) && endswith(var.master_ipv4_cidr_block, "/28")
    error_message = "master_ipv4_cidr_block must be a /28 such as 172.16.0.32/28."
  }
}

variable "master_authorized_networks" {
  description = "Addresses that may reach the cluster's API server (kubectl, terraform): your own, e.g. Cloud Shell's (curl -s ifconfig.me)/32. Empty: none from outside Google Cloud's control plane"
  type = list(object({
    cidr_block   = string
    display_name = string
  }))
  default = []

  validation {
    condition = alltrue([for n in var.master_authorized_networks :
    can(cidrhost(n.cidr_block, 0)) && !contains(["0.0.0.0/0", "::/0"], n.cidr_block)])
    error_message = "master_authorized_networks: each cidr_block must be a CIDR, and none may be 0.0.0.0/0 (every address)."
  }
}
