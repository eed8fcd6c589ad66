terraform {
  # 1.9: variable validations may refer to other variables (gpu_count checks machine_type).
  required_version = ">= 1.9"

  required_providers {
    google = {
      source = "hashicorp/google"
      # 6.14: registry_uri on Artifact Registry repositories and DCGM in monitoring_config.
      version = ">= 6.14, < 8.0"
    }
  }
}

provider "google" {
  project = var.project_id
  region  = var.region
}
