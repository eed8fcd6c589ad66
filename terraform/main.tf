# A zonal GKE Standard cluster for attn: an L4 node pool (GKE-installed NVIDIA driver, DCGM
# metrics) and a small CPU pool, Dataplane V2 (enforces the NetworkPolicies in deploy/), Google
# Managed Prometheus, Workload Identity, and an Artifact Registry repository for the image with
# a service account Cloud Build pushes it with.

locals {
  apis = [
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "compute.googleapis.com",
    "container.googleapis.com",
    "containerfilesystem.googleapis.com", # image streaming (gcfs_config on the L4 pool)
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
  ]
}

resource "google_project_service" "apis" {
  for_each           = toset(local.apis)
  project            = var.project_id
  service            = each.value
  disable_on_destroy = false
}

# --- Network ---------------------------------------------------------------------------------

resource "google_compute_network" "vpc" {
  name                    = "${var.cluster_name}-vpc"
  auto_create_subnetworks = false
  depends_on              = [google_project_service.apis]
}

resource "google_compute_subnetwork" "nodes" {
  name                     = "${var.cluster_name}-nodes"
  region                   = var.region
  network                  = google_compute_network.vpc.id
  ip_cidr_range            = "10.20.0.0/22"
  private_ip_google_access = true

  secondary_ip_range {
    range_name    = "pods"
    ip_cidr_range = "10.24.0.0/14"
  }

  secondary_ip_range {
    range_name    = "services"
    ip_cidr_range = "10.28.0.0/20"
  }
}

# --- Service accounts --------------------------------------------------------------------------

# Nodes: the minimal node role (logs, metrics, metadata) and pulls from the attn repository only.
resource "google_service_account" "nodes" {
  account_id   = "${var.cluster_name}-nodes"
  display_name = "GKE nodes of ${var.cluster_name}"
  depends_on   = [google_project_service.apis]
}

resource "google_project_iam_member" "nodes_default" {
  project = var.project_id
  role    = "roles/container.defaultNodeServiceAccount"
  member  = "serviceAccount:${google_service_account.nodes.email}"
}

# Cloud Build runs the image build as this account (deploy/cloudbuild.yaml, README).
resource "google_service_account" "build" {
  account_id   = "${var.cluster_name}-build"
  display_name = "Builds the attn-server image for ${var.cluster_name}"
  depends_on   = [google_project_service.apis]
}

resource "google_project_iam_member" "build_builder" {
  project = var.project_id
  role    = "roles/cloudbuild.builds.builder"
  member  = "serviceAccount:${google_service_account.build.email}"
}

# --- Artifact Registry -------------------------------------------------------------------------

resource "google_artifact_registry_repository" "images" {
  location      = var.region
  repository_id = var.artifact_repository_id
  format        = "DOCKER"
  description   = "attn-server images for ${var.cluster_name}"
  depends_on    = [google_project_service.apis]
}

resource "google_artifact_registry_repository_iam_member" "nodes_pull" {
  location   = google_artifact_registry_repository.images.location
  repository = google_artifact_registry_repository.images.name
  role       = "roles/artifactregistry.reader"
  member     = "serviceAccount:${google_service_account.nodes.email}"
}

resource "google_artifact_registry_repository_iam_member" "build_push" {
  location   = google_artifact_registry_repository.images.location
  repository = google_artifact_registry_repository.images.name
  role       = "roles/artifactregistry.writer"
  member     = "serviceAccount:${google_service_account.build.email}"
}

# --- Cluster -----------------------------------------------------------------------------------

resource "google_container_cluster" "primary" {
  name     = var.cluster_name
  location = var.zone

  # Node pools are managed below; the default pool is created and removed at once.
  remove_default_node_pool = true
  initial_node_count       = 1

  network         = google_compute_network.vpc.id
  subnetwork      = google_compute_subnetwork.nodes.id
  networking_mode = "VPC_NATIVE"
  ip_allocation_policy {
    cluster_secondary_range_name  = "pods"
    services_secondary_range_name = "services"
  }

  # Dataplane V2 enforces NetworkPolicy (deploy/base/networkpolicy.yaml).
  datapath_provider = "ADVANCED_DATAPATH"

  # Private nodes (no public addresses; images come through Private Google Access on the subnet)
  # and an API server that answers only the addresses in master_authorized_networks.
  private_cluster_config {
    enable_private_nodes    = var.enable_private_nodes
    enable_private_endpoint = false
    master_ipv4_cidr_block  = var.master_ipv4_cidr_block
  }

  master_authorized_networks_config {
    dynamic "cidr_blocks" {
      for_each = var.master_authorized_networks
      content {
        cidr_block   = cidr_blocks.value.cidr_block
        display_name = cidr_blocks.value.display_name
      }
    }
  }

  release_channel {
    channel = var.release_channel
  }

  workload_identity_config {
    workload_pool = "${var.project_id}.svc.id.goog"
  }

  # Google Managed Prometheus (managed collection: PodMonitoring, Rules) and DCGM GPU metrics
  # (DCGM_FI_DEV_* on the dashboard) from the GKE-managed DCGM exporter.
  monitoring_config {
    enable_components = ["SYSTEM_COMPONENTS", "DCGM"]
    managed_prometheus {
      enabled = true
    }
  }

  logging_config {
    enable_components = ["SYSTEM_COMPONENTS", "WORKLOADS"]
  }

  deletion_protection = var.deletion_protection

  depends_on = [google_project_service.apis]
}

# System and monitoring pods (kube-dns, GMP's rule evaluator, Grafana) live here, off the GPUs.
resource "google_container_node_pool" "cpu" {
  name       = "cpu-pool"
  location   = var.zone
  cluster    = google_container_cluster.primary.name
  node_count = var.cpu_node_count

  management {
    auto_repair  = true
    auto_upgrade = true
  }

  node_config {
    machine_type    = var.cpu_machine_type
    image_type      = "COS_CONTAINERD"
    disk_type       = "pd-balanced"
    disk_size_gb    = 50
    service_account = google_service_account.nodes.email
    oauth_scopes    = ["https://www.googleapis.com/auth/cloud-platform"]

    workload_metadata_config {
      mode = "GKE_METADATA"
    }

    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }
  }

  # Nodes that start before their account may pull the image only retry until IAM catches up.
  depends_on = [
    google_project_iam_member.nodes_default,
    google_artifact_registry_repository_iam_member.nodes_pull,
  ]
}

resource "google_container_node_pool" "gpu" {
  name       = "l4-pool"
  location   = var.zone
  cluster    = google_container_cluster.primary.name
  node_count = var.gpu_node_count

  management {
    auto_repair  = true
    auto_upgrade = true
  }

  # One node at a time, no surge: the new node would need L4 quota beyond gpu_node_count.
  upgrade_settings {
    strategy        = "SURGE"
    max_surge       = 0
    max_unavailable = 1
  }

  node_config {
    machine_type    = var.machine_type
    image_type      = "COS_CONTAINERD"
    disk_type       = "pd-balanced"
    disk_size_gb    = 100
    service_account = google_service_account.nodes.email
    oauth_scopes    = ["https://www.googleapis.com/auth/cloud-platform"]

    guest_accelerator {
      type  = var.gpu_type
      count = var.gpu_count

      # The image is CUDA 13.0, which needs an R580 driver: see variables.tf and the README.
      gpu_driver_installation_config {
        gpu_driver_version = var.gpu_driver_version
      }
    }

    # Only pods that tolerate the GPU taint (attn-server) land here.
    taint {
      key    = "nvidia.com/gpu"
      value  = "present"
      effect = "NO_SCHEDULE"
    }

    labels = {
      "attn-pool" = "l4"
    }

    # Image streaming: the CUDA + cuDNN runtime image starts without a full pull first.
    gcfs_config {
      enabled = true
    }

    workload_metadata_config {
      mode = "GKE_METADATA"
    }

    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }
  }

  # Nodes that start before their account may pull the image only retry until IAM catches up.
  depends_on = [
    google_project_iam_member.nodes_default,
    google_artifact_registry_repository_iam_member.nodes_pull,
  ]
}

# --- The cohort's JupyterHub ---------------------------------------------------------------------

# The hub's public address, reserved here so that it is known (and a DNS name and certificate can
# be made for it) before the hub's LoadBalancer exists; deploy/jupyterhub's overlay sets it as the
# Service's loadBalancerIP (README, "The host's workshop day").
resource "google_compute_address" "hub" {
  name         = "${var.cluster_name}-hub"
  region       = var.region
  address_type = "EXTERNAL"
  depends_on   = [google_project_service.apis]
}

