// Package validate checks the manifests of deploy/kubernetes offline, in `make deploy-check`
// (run by `make test`), with nothing fetched at test time:
//
//	decoding     every document of every manifest, strictly, into the official API types
//	             (k8s.io/api through apimachinery's universal deserializer): an unknown or
//	             duplicated field, a wrong apiVersion or kind, a value of the wrong type fails
//	kustomize    kustomization.yaml lists every manifest but secret.example.yaml, and only those
//	the sidecar  a native sidecar (an init container with restartPolicy Always) serving the
//	             ConfigMap's config, with gRPC startup, readiness and liveness probes on the
//	             health service, every ${NAME} of its config in its environment, every secret
//	             from the Secret, the pod's grace period above server.grace_period_s
//	hardening    every container non-root, read-only root, no privilege escalation, ALL dropped,
//	             with resources
//	the network  no NetworkPolicy admits anything to the agent pods' 50051; Redis admits only
//	             the sidecar pods, on 6379 only, and sends nothing out; the metrics port (9464)
//	             admits one namespace's Prometheus pods only (both selectors in one peer)
//
// The sidecar config inside the ConfigMap is checked against the sidecar's own schema by
// tests/processes/test_deploy_manifests.py (Python, where the schema lives).
package validate
