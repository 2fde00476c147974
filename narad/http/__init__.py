"""HTTP resources: parse and check requests, call a service, shape responses."""
