//! An embedded Kubernetes-compatible API server.
