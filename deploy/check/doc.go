// Package check holds the tests of hookrelay's deployment artefacts, run by
// `make deploy-check`: the Dockerfile (BuildKit's parser), the Compose file
// (compose-go), the Helm chart's rendered manifests (strict k8s.io/api
// decoding, the Prometheus Operator resources as unstructured objects, alert
// expressions through the PromQL parser) and the Grafana dashboards.
//
// It is a module of its own so that the Kubernetes, Compose and Prometheus
// libraries stay out of hookrelay's go.mod. No container engine or cluster is
// needed: everything is parsed and validated, nothing is run.
package check
