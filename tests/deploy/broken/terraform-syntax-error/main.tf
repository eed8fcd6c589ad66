variable "project_id" {
  type = string

output "get_credentials_command" {
  value = "gcloud container clusters get-credentials attn --project ${var.project_id}"
}
