"""Images and deployments of a user's project: Dockerfile, wheel, compose file, nginx."""
