output "get_credentials_command" {
  description = "Run this to point kubectl at the cluster"
  value       = "gcloud container clusters get-credentials ${google_container_cluster.primary.name} --zone ${var.zone} --project ${var.project_id}"
}

output "cluster_name" {
  description = "GKE cluster name"
  value       = google_container_cluster.primary.name
}

output "region" {
  description = "GCP region"
  value       = var.region
}

output "zone" {
  description = "GCP zone of the cluster and its node pools"
  value       = var.zone
}

output "image_repository" {
  description = "Artifact Registry repository to push attn-server to (<this>/attn-server:<tag>)"
  value       = google_artifact_registry_repository.images.registry_uri
}

output "registry_host" {
  description = "Host of image_repository, for `gcloud auth configure-docker`"
  value       = split("/", google_artifact_registry_repository.images.registry_uri)[0]
}

output "build_service_account" {
  description = "Service account Cloud Build runs the image build as (gcloud builds submit --service-account)"
  value       = google_service_account.build.id
}

output "gpu_driver_version" {
  description = "NVIDIA driver setting of the L4 pool"
  value       = var.gpu_driver_version
}

output "hub_address" {
  description = "The cohort JupyterHub's public address (its LoadBalancer's loadBalancerIP)"
  value       = google_compute_address.hub.address
}

output "hub_url" {
  description = "The cohort JupyterHub, to hand out to participants (or a DNS name you point at hub_address)"
  value       = "https://${google_compute_address.hub.address}/"
}

