package validate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	manifestDir      = ".."
	kustomization    = "kustomization.yaml"
	secretExample    = "secret.example.yaml"
	sidecarName      = "sidecar"
	sidecarPort      = 50051
	metricsPort      = 9464 // telemetry.prometheus_port in configmap.yaml: the one port a scrape may reach
	redisPort        = 6379
	healthService    = "sidecar.v1.Sidecar"
	configMountPath  = "/etc/sidecar"
	configKey        = "config.yaml"
	secretMarker     = "replace-" // every value of the example Secret is a placeholder starting so
	agentDeployment  = "agent"
	redisDeployment  = "sidecar-redis"
	defaultGraceSecs = 10.0 // server.grace_period_s when the config leaves it out (sidecar/config/bounds.py)
)

// secretName: an environment variable so named carries a secret and must come from the Secret.
var secretName = regexp.MustCompile(`(?i)(KEY|TOKEN|PASSWORD|SECRET)`)

// configVariable: ${NAME} or ${NAME:-default} in the sidecar's config (sidecar/config/secrets.py).
var configVariable = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)

func decoder() runtime.Decoder {
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(appsv1.AddToScheme(scheme))
	utilruntime.Must(networkingv1.AddToScheme(scheme))
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}

// documents splits a YAML stream into its documents, leaving out those that hold only comments.
func documents(data []byte) ([][]byte, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		var probe any
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			return nil, err
		}
		if probe != nil {
			out = append(out, doc)
		}
	}
}

// decodeStrict decodes one document into its typed object; any strictness complaint is an error.
func decodeStrict(doc []byte) (runtime.Object, error) {
	obj, _, err := decoder().Decode(doc, nil, nil)
	if err != nil {
		return nil, err
	}
	return obj, nil
}

type manifests struct {
	deployments   map[string]*appsv1.Deployment
	services      map[string]*corev1.Service
	configMaps    map[string]*corev1.ConfigMap
	secrets       map[string]*corev1.Secret
	policies      []*networkingv1.NetworkPolicy
	files         []string // the manifests' file names, kustomization.yaml left out
	kustomization struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Namespace  string   `json:"namespace,omitempty"`
		Resources  []string `json:"resources"`
	}
}

func load(t *testing.T) *manifests {
	t.Helper()
	m := &manifests{
		deployments: map[string]*appsv1.Deployment{},
		services:    map[string]*corev1.Service{},
		configMaps:  map[string]*corev1.ConfigMap{},
		secrets:     map[string]*corev1.Secret{},
	}
	paths, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestDir, err)
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(path)
		if name == kustomization {
			if err := yaml.UnmarshalStrict(data, &m.kustomization); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			continue
		}
		m.files = append(m.files, name)
		docs, err := documents(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(docs) == 0 {
			t.Errorf("%s: no document", name)
		}
		for i, doc := range docs {
			obj, err := decodeStrict(doc)
			if err != nil {
				t.Errorf("%s, document %d: %v", name, i+1, err)
				continue
			}
			switch o := obj.(type) {
			case *appsv1.Deployment:
				m.deployments[o.Name] = o
			case *corev1.Service:
				m.services[o.Name] = o
			case *corev1.ConfigMap:
				m.configMaps[o.Name] = o
			case *corev1.Secret:
				m.secrets[o.Name] = o
			case *networkingv1.NetworkPolicy:
				m.policies = append(m.policies, o)
			default:
				t.Errorf("%s, document %d: a %T, which this check does not know", name, i+1, obj)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return m
}

func (m *manifests) deployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	d, ok := m.deployments[name]
	if !ok {
		t.Fatalf("no Deployment %q (have %v)", name, keys(m.deployments))
	}
	return d
}

// sidecar is the agent pod's sidecar container: an init container by that name.
func (m *manifests) sidecar(t *testing.T) (*corev1.PodSpec, *corev1.Container) {
	t.Helper()
	spec := &m.deployment(t, agentDeployment).Spec.Template.Spec
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == sidecarName {
			return spec, &spec.InitContainers[i]
		}
	}
	t.Fatalf("the agent pod has no init container %q", sidecarName)
	return nil, nil
}

func (m *manifests) theConfigMap(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	if len(m.configMaps) != 1 {
		t.Fatalf("want one ConfigMap, have %v", keys(m.configMaps))
	}
	for _, c := range m.configMaps {
		return c
	}
	return nil
}

func (m *manifests) theSecret(t *testing.T) *corev1.Secret {
	t.Helper()
	if len(m.secrets) != 1 {
		t.Fatalf("want one Secret (%s), have %v", secretExample, keys(m.secrets))
	}
	for _, s := range m.secrets {
		return s
	}
	return nil
}

// sidecarConfig is the sidecar's config.yaml, as text and as YAML values.
func (m *manifests) sidecarConfig(t *testing.T) (string, map[string]any) {
	t.Helper()
	text, ok := m.theConfigMap(t).Data[configKey]
	if !ok {
		t.Fatalf("the ConfigMap has no %s", configKey)
	}
	var values map[string]any
	if err := yaml.Unmarshal([]byte(text), &values); err != nil {
		t.Fatalf("the ConfigMap's %s is not YAML: %v", configKey, err)
	}
	return text, values
}

// deref is what p points at, or the zero value (printed as "" or 0) for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func selects(t *testing.T, selector *metav1.LabelSelector, podLabels map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		t.Fatalf("selector %v: %v", selector, err)
	}
	return s.Matches(labels.Set(podLabels))
}

// ---------------------------------------------------------------- decoding

func TestEveryManifestDecodesStrictlyIntoTheAPITypes(t *testing.T) {
	m := load(t) // fails on any document that does not decode strictly
	want := []string{"agent.yaml", "configmap.yaml", "networkpolicy.yaml", "redis.yaml", secretExample}
	if !slices.Equal(m.files, want) {
		t.Errorf("manifests %v, want %v", m.files, want)
	}
	if len(m.deployments) != 2 || len(m.services) != 1 || len(m.policies) != 2 {
		t.Errorf("deployments %v, services %v, %d policies", keys(m.deployments), keys(m.services), len(m.policies))
	}
}

func TestStrictDecodingRefusesWhatALenientOneWouldDrop(t *testing.T) {
	base := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replicas: 1\n"
	if _, err := decodeStrict([]byte(base)); err != nil {
		t.Fatalf("the base document: %v", err)
	}
	for name, doc := range map[string]string{
		"an unknown field":         base + "  replica: 2\n",
		"a duplicated field":       base + "  replicas: 2\n",
		"a field at a wrong level": strings.Replace(base, "spec:", "restartPolicy: Always\nspec:", 1),
		"a wrong type":             strings.Replace(base, "replicas: 1", "replicas: one", 1),
		"an unknown kind":          strings.Replace(base, "kind: Deployment", "kind: Deploymnet", 1),
		"a kind in a wrong group":  strings.Replace(base, "apps/v1", "v1", 1),
	} {
		if _, err := decodeStrict([]byte(doc)); err == nil {
			t.Errorf("%s was accepted", name)
		}
	}
}

func TestTheKustomizationListsEveryManifestButTheExampleSecret(t *testing.T) {
	m := load(t)
	k := m.kustomization
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("kustomization: apiVersion %q kind %q", k.APIVersion, k.Kind)
	}
	var want []string
	for _, f := range m.files {
		if f != secretExample {
			want = append(want, f)
		}
	}
	got := slices.Sorted(slices.Values(k.Resources))
	if !slices.Equal(got, want) {
		t.Errorf("kustomization resources %v, want %v (never %s: its values are placeholders)", got, want, secretExample)
	}
}

// ---------------------------------------------------------------- the sidecar

func TestTheSidecarIsANativeSidecarServingTheConfigMap(t *testing.T) {
	m := load(t)
	spec, sc := m.sidecar(t)
	if sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("the sidecar init container's restartPolicy is %q, want Always (a native sidecar)", deref(sc.RestartPolicy))
	}
	if len(spec.Containers) != 1 || spec.Containers[0].Name == sidecarName {
		t.Errorf("want the agent alone in containers, have %d", len(spec.Containers))
	}
	wantArgs := []string{"serve", "--config", configMountPath + "/" + configKey}
	if len(sc.Command) != 0 || !slices.Equal(sc.Args, wantArgs) {
		t.Errorf("the sidecar runs command %v args %v, want the image's entrypoint with %v", sc.Command, sc.Args, wantArgs)
	}
	if !slices.ContainsFunc(sc.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == sidecarPort }) {
		t.Errorf("the sidecar declares no port %d", sidecarPort)
	}

	mount := slices.IndexFunc(sc.VolumeMounts, func(v corev1.VolumeMount) bool { return v.MountPath == configMountPath })
	if mount < 0 || !sc.VolumeMounts[mount].ReadOnly {
		t.Fatalf("the sidecar mounts nothing read-only at %s", configMountPath)
	}
	vol := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == sc.VolumeMounts[mount].Name })
	if vol < 0 || spec.Volumes[vol].ConfigMap == nil {
		t.Fatalf("the volume at %s is not a ConfigMap", configMountPath)
	}
	cmv := spec.Volumes[vol].ConfigMap
	if cmv.Name != m.theConfigMap(t).Name {
		t.Errorf("the config volume names ConfigMap %q, the manifest is %q", cmv.Name, m.theConfigMap(t).Name)
	}
	if len(cmv.Items) > 0 && !slices.Contains(cmv.Items, corev1.KeyToPath{Key: configKey, Path: configKey}) {
		t.Errorf("the config volume does not put %s at %s/%s: %v", configKey, configMountPath, configKey, cmv.Items)
	}
	if cmv.Optional != nil && *cmv.Optional {
		t.Errorf("the config volume is optional: the sidecar would start on no config")
	}
	m.sidecarConfig(t) // and the key is there, holding YAML
}

func TestTheSidecarIsProbedOverGRPCOnItsHealthService(t *testing.T) {
	m := load(t)
	_, sc := m.sidecar(t)
	for name, probe := range map[string]*corev1.Probe{
		"startupProbe": sc.StartupProbe, "readinessProbe": sc.ReadinessProbe, "livenessProbe": sc.LivenessProbe,
	} {
		if probe == nil || probe.GRPC == nil {
			t.Errorf("the sidecar's %s is not a gRPC probe: %+v", name, probe)
			continue
		}
		if probe.GRPC.Port != sidecarPort || probe.GRPC.Service == nil || *probe.GRPC.Service != healthService {
			t.Errorf("the sidecar's %s asks port %d service %q, want %d %s", name, probe.GRPC.Port, deref(probe.GRPC.Service), sidecarPort, healthService)
		}
	}
}

func TestTheSidecarListensWhereTheProbesDialAndRequiresAToken(t *testing.T) {
	m := load(t)
	text, config := m.sidecarConfig(t)
	server, _ := config["server"].(map[string]any)
	// The kubelet dials the pod's IP: a loopback-only sidecar would fail every probe.
	if listen := server["listen"]; listen != fmt.Sprintf("0.0.0.0:%d", sidecarPort) {
		t.Errorf("server.listen is %v, want 0.0.0.0:%d", listen, sidecarPort)
	}
	auth, _ := server["auth"].(map[string]any)
	tokens, _ := auth["tokens"].([]any)
	if len(tokens) == 0 || server["allow_insecure"] == true {
		t.Errorf("beyond loopback the sidecar needs server.auth.tokens, and no allow_insecure: %v", server)
	}
	state, _ := config["state"].(map[string]any)
	if state["backend"] != "redis" || state["url"] != "${REDIS_URL}" {
		t.Errorf("state is %v, want backend redis at ${REDIS_URL}", state)
	}
	// One worker: worker i serves its metrics on prometheus_port + i, and the pod's one
	// prometheus.io/port annotation names a single port.
	if server["workers"] != float64(1) { // sigs.k8s.io/yaml reads a number as float64
		t.Errorf("server.workers is %v, want 1", server["workers"])
	}
	admin, _ := server["admin"].(map[string]any)
	if adminTokens, _ := admin["tokens"].([]any); len(adminTokens) != 1 || adminTokens[0] != "${SIDECAR_ADMIN_TOKEN}" {
		t.Errorf("server.admin.tokens is %v, want the operator's token from the environment", admin["tokens"])
	}
	http, _ := config["http"].(map[string]any)
	if listen, _ := http["listen"].(string); !strings.HasPrefix(listen, "127.0.0.1:") {
		t.Errorf("http.listen is %v, want the pod's loopback (the admin routes are served there)", http["listen"])
	}
	if strings.Contains(text, "allow_insecure: true") {
		t.Error("the config allows an insecure listener")
	}
}

func TestEveryVariableOfTheConfigIsInTheSidecarsEnvironmentAndEverySecretFromTheSecret(t *testing.T) {
	m := load(t)
	spec, sc := m.sidecar(t)
	secret := m.theSecret(t)
	text, _ := m.sidecarConfig(t)
	env := map[string]corev1.EnvVar{}
	for i, e := range sc.Env {
		// $(NAME) in a value is expanded by the kubelet only from a variable defined before it.
		for _, ref := range regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).FindAllStringSubmatch(e.Value, -1) {
			if _, ok := env[ref[1]]; !ok {
				t.Errorf("env %s (#%d) uses $(%s) before it is defined", e.Name, i, ref[1])
			}
		}
		env[e.Name] = e
	}
	if len(sc.EnvFrom) != 0 {
		t.Errorf("the sidecar takes envFrom %v: name each variable, so this check sees each", sc.EnvFrom)
	}
	for _, match := range configVariable.FindAllStringSubmatch(text, -1) {
		if _, ok := env[match[1]]; !ok && match[2] == "" {
			t.Errorf("the config reads ${%s}, which the sidecar's environment does not set", match[1])
		}
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, e := range c.Env {
			if !secretName.MatchString(e.Name) {
				continue
			}
			ref := secretRef(e)
			if ref == nil {
				t.Errorf("%s's %s is not read from a Secret", c.Name, e.Name)
				continue
			}
			if ref.Name != secret.Name {
				t.Errorf("%s's %s names Secret %q, the manifest is %q", c.Name, e.Name, ref.Name, secret.Name)
			}
			if _, ok := secret.StringData[ref.Key]; !ok {
				t.Errorf("%s's %s reads key %q, which %s lacks", c.Name, e.Name, ref.Key, secretExample)
			}
		}
	}
	// The token the agent presents is the one the sidecar accepts.
	agent := spec.Containers[0]
	i := slices.IndexFunc(agent.Env, func(e corev1.EnvVar) bool { return e.Name == "SIDECAR_TOKEN" })
	if i < 0 {
		t.Errorf("the agent has no SIDECAR_TOKEN")
	} else if presented, accepted := secretRef(agent.Env[i]), secretRef(env["AGENT_TOKEN"]); presented == nil || accepted == nil || *presented != *accepted {
		t.Errorf("the agent's SIDECAR_TOKEN (%+v) is not the sidecar's AGENT_TOKEN (%+v)", presented, accepted)
	}
	if addr := envValue(agent.Env, "SIDECAR_ADDR"); addr != fmt.Sprintf("127.0.0.1:%d", sidecarPort) {
		t.Errorf("the agent dials %q, want the sidecar on the pod's loopback", addr)
	}
}

// secretRef is the Secret key a variable is read from, or nil.
func secretRef(e corev1.EnvVar) *corev1.SecretKeySelector {
	if e.ValueFrom == nil {
		return nil
	}
	return e.ValueFrom.SecretKeyRef
}

func envValue(env []corev1.EnvVar, name string) string {
	for _, e := range env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func TestTheSecretHoldsPlaceholdersOnly(t *testing.T) {
	s := load(t).theSecret(t)
	if len(s.Data) != 0 {
		t.Errorf("%s has data: (base64): write placeholders in stringData", secretExample)
	}
	for k, v := range s.StringData {
		if !strings.HasPrefix(v, secretMarker) {
			t.Errorf("%s: %s is not a placeholder (starts %q, want %q)", secretExample, k, v[:min(len(v), 3)], secretMarker)
		}
	}
}

func TestTheSidecarReachesRedisThroughItsService(t *testing.T) {
	m := load(t)
	_, sc := m.sidecar(t)
	url := envValue(sc.Env, "REDIS_URL")
	found := regexp.MustCompile(`^redis://:\$\(REDIS_PASSWORD\)@([a-z0-9-]+):(\d+)/\d+$`).FindStringSubmatch(url)
	if found == nil {
		t.Fatalf("REDIS_URL %q is not redis://:$(REDIS_PASSWORD)@SERVICE:PORT/DB", url)
	}
	svc, ok := m.services[found[1]]
	if !ok {
		t.Fatalf("REDIS_URL names host %q: no such Service (have %v)", found[1], keys(m.services))
	}
	if len(svc.Spec.Ports) != 1 || fmt.Sprint(svc.Spec.Ports[0].Port) != found[2] || found[2] != fmt.Sprint(redisPort) {
		t.Errorf("REDIS_URL's port %s, the Service's ports %v, want %d", found[2], svc.Spec.Ports, redisPort)
	}
	redis := m.deployment(t, redisDeployment)
	if !selects(t, &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, redis.Spec.Template.Labels) {
		t.Errorf("Service %s selects %v, not the Redis pods %v", svc.Name, svc.Spec.Selector, redis.Spec.Template.Labels)
	}
	target := svc.Spec.Ports[0].TargetPort
	if containerPort(redis.Spec.Template.Spec.Containers, target) != redisPort {
		t.Errorf("Service %s targets %v, not Redis's port %d", svc.Name, target.String(), redisPort)
	}
	args := strings.Join(redis.Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--requirepass $(REDIS_PASSWORD)") || !strings.Contains(args, "--appendonly no") {
		t.Errorf("Redis runs with %q: want a password from the Secret and no persistence", args)
	}
}

// containerPort resolves a port (a number or a container port's name) in the pod's containers.
func containerPort(containers []corev1.Container, port intstr.IntOrString) int32 {
	if port.Type == intstr.Int {
		return port.IntVal
	}
	for _, c := range containers {
		for _, p := range c.Ports {
			if p.Name == port.StrVal {
				return p.ContainerPort
			}
		}
	}
	return -1
}

func TestThePodsOutliveTheSidecarsGracePeriod(t *testing.T) {
	m := load(t)
	spec, _ := m.sidecar(t)
	_, config := m.sidecarConfig(t)
	grace := defaultGraceSecs
	if server, ok := config["server"].(map[string]any); ok {
		if g, ok := server["grace_period_s"].(float64); ok {
			grace = g
		}
	}
	if spec.TerminationGracePeriodSeconds == nil || float64(*spec.TerminationGracePeriodSeconds) <= grace {
		t.Errorf("terminationGracePeriodSeconds %d must exceed server.grace_period_s %v", deref(spec.TerminationGracePeriodSeconds), grace)
	}
}

// ---------------------------------------------------------------- hardening

func TestEveryContainerIsHardenedAndSized(t *testing.T) {
	m := load(t)
	for _, d := range m.deployments {
		if !selects(t, d.Spec.Selector, d.Spec.Template.Labels) {
			t.Errorf("Deployment %s: its selector does not match its own pods", d.Name)
		}
		pod := d.Spec.Template.Spec
		psc := pod.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
			t.Errorf("Deployment %s: the pod must run as a numeric non-root user: %+v", d.Name, psc)
		}
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Errorf("Deployment %s mounts a service account token it has no use for", d.Name)
		}
		for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
			sc := c.SecurityContext
			switch {
			case sc == nil:
				t.Errorf("%s/%s: no securityContext", d.Name, c.Name)
			case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
				t.Errorf("%s/%s: the root filesystem is writable", d.Name, c.Name)
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Errorf("%s/%s: privilege escalation is allowed", d.Name, c.Name)
			case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
				t.Errorf("%s/%s: capabilities %+v, want ALL dropped and none added", d.Name, c.Name, sc.Capabilities)
			}
			r := c.Resources
			if r.Requests.Cpu().IsZero() || r.Requests.Memory().IsZero() || r.Limits.Memory().IsZero() {
				t.Errorf("%s/%s: want cpu and memory requests and a memory limit: %+v", d.Name, c.Name, r)
			}
		}
	}
}

// ---------------------------------------------------------------- the network

// admits: does this ingress rule let traffic in on the container port (number or name)?
func admits(rule networkingv1.NetworkPolicyIngressRule, containers []corev1.Container, port int32) bool {
	if len(rule.Ports) == 0 {
		return true // no ports: every port
	}
	for _, p := range rule.Ports {
		if p.Port == nil {
			return true
		}
		from := containerPort(containers, *p.Port)
		to := from
		if p.EndPort != nil {
			to = *p.EndPort
		}
		if from <= port && port <= to {
			return true
		}
	}
	return false
}

func TestNoPodReachesTheSidecarsPort(t *testing.T) {
	m := load(t)
	agent := m.deployment(t, agentDeployment).Spec.Template
	containers := append(slices.Clone(agent.Spec.InitContainers), agent.Spec.Containers...)
	isolated := false
	for _, p := range m.policies {
		if !selects(t, &p.Spec.PodSelector, agent.Labels) || !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		isolated = true
		for i, rule := range p.Spec.Ingress {
			if admits(rule, containers, sidecarPort) {
				t.Errorf("NetworkPolicy %s, ingress rule %d, admits port %d to the agent pods", p.Name, i, sidecarPort)
			}
		}
	}
	if !isolated {
		t.Errorf("no NetworkPolicy isolates the agent pods' ingress: any pod reaches %d", sidecarPort)
	}
}

func TestOnlyTheSidecarsReachRedis(t *testing.T) {
	m := load(t)
	agentLabels := m.deployment(t, agentDeployment).Spec.Template.Labels
	redis := m.deployment(t, redisDeployment).Spec.Template
	var ingress, egress bool
	reached := false
	for _, p := range m.policies {
		if !selects(t, &p.Spec.PodSelector, redis.Labels) {
			continue
		}
		ingress = ingress || slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
		egress = egress || slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		if len(p.Spec.Egress) > 0 {
			t.Errorf("NetworkPolicy %s lets Redis send traffic out: %+v", p.Name, p.Spec.Egress)
		}
		for i, rule := range p.Spec.Ingress {
			if len(rule.From) == 0 {
				t.Errorf("NetworkPolicy %s, ingress rule %d, admits every source to Redis", p.Name, i)
			}
			for _, peer := range rule.From {
				if peer.IPBlock != nil || peer.NamespaceSelector != nil || peer.PodSelector == nil {
					t.Errorf("NetworkPolicy %s, ingress rule %d: a source beyond this namespace's pods: %+v", p.Name, i, peer)
				} else if selects(t, peer.PodSelector, redis.Labels) || len(peer.PodSelector.MatchLabels)+len(peer.PodSelector.MatchExpressions) == 0 {
					t.Errorf("NetworkPolicy %s, ingress rule %d: the source %v is not the sidecar pods alone", p.Name, i, peer.PodSelector)
				} else if selects(t, peer.PodSelector, agentLabels) && admits(rule, redis.Spec.Containers, redisPort) {
					reached = true
				}
			}
			for port := int32(1); port <= 65535; port++ {
				if port != redisPort && admits(rule, redis.Spec.Containers, port) {
					t.Errorf("NetworkPolicy %s, ingress rule %d, admits port %d to Redis", p.Name, i, port)
					break
				}
			}
		}
	}
	if !ingress || !egress {
		t.Errorf("Redis's ingress isolated %v, egress isolated %v: want both", ingress, egress)
	}
	if !reached {
		t.Errorf("no NetworkPolicy admits the sidecar pods %v to Redis's %d", agentLabels, redisPort)
	}
}

func TestOnlyTheMonitoringPodsReachTheMetricsPort(t *testing.T) {
	m := load(t)
	agent := m.deployment(t, agentDeployment).Spec.Template
	containers := append(slices.Clone(agent.Spec.InitContainers), agent.Spec.Containers...)
	scraped := false
	for _, p := range m.policies {
		if !selects(t, &p.Spec.PodSelector, agent.Labels) {
			continue
		}
		for i, rule := range p.Spec.Ingress {
			if !admits(rule, containers, metricsPort) {
				continue
			}
			if len(rule.From) == 0 {
				t.Errorf("NetworkPolicy %s, ingress rule %d, admits every source to the metrics port", p.Name, i)
			}
			for _, peer := range rule.From {
				if peer.IPBlock != nil || peer.NamespaceSelector == nil || peer.PodSelector == nil {
					t.Errorf("NetworkPolicy %s, ingress rule %d: the metrics port's source %+v is not one namespace's pods", p.Name, i, peer)
				}
			}
			scraped = true
		}
	}
	if !scraped {
		t.Errorf("no NetworkPolicy admits Prometheus to the metrics port %d: the scrape would be dropped", metricsPort)
	}
}
