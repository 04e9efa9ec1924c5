"""`runyard k8s`: plain Kubernetes manifests of a project's image, with a kustomization."""
