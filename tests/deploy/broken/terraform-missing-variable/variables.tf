# The codelab's variables without gpu_count.
variable "project_id" {
  type = string
}

variable "region" {
  type    = string
  default = "us-central1"
}

variable "zone" {
  type    = string
  default = "us-central1-a"
}

variable "cluster_name" {
  type    = string
  default = "attn-cluster"
}

variable "machine_type" {
  type    = string
  default = "g2-standard-8"
}

variable "gpu_type" {
  type    = string
  default = "nvidia-l4"
}

variable "gpu_driver_version" {
  type    = string
  default = "LATEST"
}
