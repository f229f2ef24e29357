package evidence

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Dir is the directory of one tier's (and optionally one test's) evidence
// under the repository root: _output/test-logs/<tier>/<test>. A subtest's
// name ("TestX/case") becomes nested directories.
func Dir(root, tier string, test ...string) string {
	parts := []string{root, "_output", "test-logs", tier}
	for _, t := range test {
		parts = append(parts, filepath.FromSlash(sanitize(t)))
	}
	return filepath.Join(parts...)
}

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.', r == '/':
			return r
		}
		return '_'
	}, name)
}

// Collector writes evidence files into one directory. Its methods may be
// called from several goroutines; none returns an error (see the package
// documentation): failures are listed in errors.txt by Close.
type Collector struct {
	client kubernetes.Interface
	dir    string

	mu     sync.Mutex // guards errs and files
	treeMu sync.Mutex // serialises CopyTree (a log keeper and a final collection)
	errs   []string
	files  map[string]string // relative name -> what it holds
}

// New returns a Collector writing into dir (created; files already there
// are kept, so that several collections of one test add up). client may be
// nil for a Collector that only copies files.
func New(client kubernetes.Interface, dir string) *Collector {
	c := &Collector{client: client, dir: dir, files: map[string]string{}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.errorf("creating %s: %v", dir, err)
	}
	return c
}

// Dir is where the files go.
func (c *Collector) Dir() string { return c.dir }

func (c *Collector) errorf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

// WriteFile writes data to the relative path name; what says what it holds
// (index.txt).
func (c *Collector) WriteFile(name, what string, data []byte) {
	p := filepath.Join(c.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		c.errorf("%s: %v", name, err)
		return
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		c.errorf("%s: %v", name, err)
		return
	}
	c.mu.Lock()
	c.files[name] = what
	c.mu.Unlock()
}

// Note appends a line to notes.txt: what the caller saw when it failed
// (the assertion, a precondition, a removal).
func (c *Collector) Note(format string, args ...any) {
	p := filepath.Join(c.dir, "notes.txt")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.errorf("notes.txt: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339), fmt.Sprintf(format, args...))
	c.mu.Lock()
	c.files["notes.txt"] = "what the test noted (failures, removals)"
	c.mu.Unlock()
}

// toYAML renders obj with its kind and without managed fields, as
// `kubectl get -o yaml` would.
func toYAML(obj runtime.Object) ([]byte, error) {
	obj = obj.DeepCopyObject()
	if gvks, _, err := scheme.Scheme.ObjectKinds(obj); err == nil && len(gvks) > 0 {
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return yaml.Marshal(obj)
}

// describe writes name: the object's YAML, then the events that name it
// (kind and name, in its namespace, as `kubectl describe` lists them).
func (c *Collector) describe(ctx context.Context, name, kind string, obj runtime.Object) {
	b, err := toYAML(obj)
	if err != nil {
		c.errorf("%s: %v", name, err)
		return
	}
	m := obj.(metav1.Object)
	out := string(b) + "\n---\n# Events of " + kind + " " + m.GetName() + ":\n"
	sel := fields.Set{"involvedObject.kind": kind, "involvedObject.name": m.GetName()}.AsSelector().String()
	ns := m.GetNamespace() // "" for cluster-scoped objects: their events are in every namespace
	if c.client != nil {
		evs, err := c.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			out += "# cannot list: " + err.Error() + "\n"
		} else {
			out += eventTable(evs.Items, false)
		}
	}
	c.WriteFile(name, kind+" "+m.GetName()+": object and events (describe)", []byte(out))
}

// eventTime is when an event last happened, whichever field its reporter
// filled.
func eventTime(e v1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// eventTable formats events oldest first, as `kubectl get events`;
// withObject adds the object column (for a namespace's events).
func eventTable(evs []v1.Event, withObject bool) string {
	sort.SliceStable(evs, func(i, j int) bool { return eventTime(evs[i]).Before(eventTime(evs[j])) })
	var sb strings.Builder
	w := tabwriter.NewWriter(&sb, 0, 4, 2, ' ', 0)
	if withObject {
		fmt.Fprintln(w, "LAST SEEN (UTC)\tTYPE\tREASON\tOBJECT\tSOURCE\tCOUNT\tMESSAGE")
	} else {
		fmt.Fprintln(w, "LAST SEEN (UTC)\tTYPE\tREASON\tSOURCE\tCOUNT\tMESSAGE")
	}
	for _, e := range evs {
		src := e.Source.Component
		if src == "" {
			src = e.ReportingController
		}
		if e.Source.Host != "" {
			src += "/" + e.Source.Host
		}
		count := e.Count
		if e.Series != nil {
			count = e.Series.Count
		}
		msg := strings.ReplaceAll(strings.TrimSpace(e.Message), "\n", " ")
		when := eventTime(e).UTC().Format("15:04:05")
		if withObject {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s/%s\t%s\t%d\t%s\n", when, e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, src, count, msg)
		} else {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", when, e.Type, e.Reason, src, count, msg)
		}
	}
	if len(evs) == 0 {
		fmt.Fprintln(w, "(none)")
	}
	w.Flush()
	return sb.String()
}

// Pods describes the pods of namespace ns that selector (a label selector,
// "" for all) selects and saves the logs of each of their containers and
// of each container's previous instance: pods/<pod>.txt,
// logs/<pod>/<container>.log and <container>.previous.log.
func (c *Collector) Pods(ctx context.Context, ns, selector string) {
	if c.client == nil {
		return
	}
	pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		c.errorf("pods %s (%s): %v", ns, selector, err)
		return
	}
	if len(pods.Items) == 0 {
		c.Note("no pod in namespace %s matches %q", ns, selector)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		c.describe(ctx, filepath.Join("pods", p.Name+".txt"), "Pod", p)
		restarts := map[string]int32{}
		for _, s := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			restarts[s.Name] = s.RestartCount
		}
		var names []string
		for _, ct := range p.Spec.InitContainers {
			names = append(names, ct.Name)
		}
		for _, ct := range p.Spec.Containers {
			names = append(names, ct.Name)
		}
		for _, name := range names {
			c.podLog(ctx, p, name, false)
			if restarts[name] > 0 {
				c.podLog(ctx, p, name, true)
			}
		}
	}
}

func (c *Collector) podLog(ctx context.Context, p *v1.Pod, container string, previous bool) {
	name := filepath.Join("logs", p.Name, container+".log")
	what := "log of container " + container + " of pod " + p.Namespace + "/" + p.Name
	if previous {
		name = filepath.Join("logs", p.Name, container+".previous.log")
		what = "log of the previous instance of container " + container + " of pod " + p.Namespace + "/" + p.Name
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	b, err := c.client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &v1.PodLogOptions{Container: container, Previous: previous, Timestamps: true}).DoRaw(rctx)
	if err != nil {
		c.errorf("%s: %v", what, err)
		return
	}
	c.WriteFile(name, what, b)
}

// Object describes any object with its events: kind/<name>.txt.
func (c *Collector) Object(ctx context.Context, kind string, obj runtime.Object) {
	m, ok := obj.(metav1.Object)
	if !ok {
		c.errorf("%s: not an object", kind)
		return
	}
	c.describe(ctx, filepath.Join(strings.ToLower(kind)+"s", m.GetName()+".txt"), kind, obj)
}

// Node describes the node name and its Lease (kube-node-lease); a missing
// node is noted.
func (c *Collector) Node(ctx context.Context, name string) {
	if c.client == nil {
		return
	}
	n, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		c.Note("node %s: %v", name, err)
		return
	}
	c.Object(ctx, "Node", n)
	l, err := c.client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		c.Note("lease %s/%s: %v", v1.NamespaceNodeLease, name, err)
		return
	}
	age := "never renewed"
	if l.Spec.RenewTime != nil {
		age = time.Since(l.Spec.RenewTime.Time).Round(100*time.Millisecond).String() + " since its last renewal"
	}
	b, err := toYAML(l)
	if err != nil {
		c.errorf("lease %s: %v", name, err)
		return
	}
	c.WriteFile(filepath.Join("leases", name+".yaml"), "the Lease of node "+name+" ("+age+" when collected)", b)
}

// Nodes describes every node that selector selects ("" for all).
func (c *Collector) Nodes(ctx context.Context, selector string) {
	if c.client == nil {
		return
	}
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		c.errorf("nodes (%s): %v", selector, err)
		return
	}
	for i := range nodes.Items {
		c.Node(ctx, nodes.Items[i].Name)
	}
}

// CSRs writes every CertificateSigningRequest (csrs.yaml) and a one-line
// summary of each (csrs.txt: name, signer, requestor, age, conditions).
func (c *Collector) CSRs(ctx context.Context) {
	if c.client == nil {
		return
	}
	l, err := c.client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		c.errorf("CSRs: %v", err)
		return
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].CreationTimestamp.Before(&l.Items[j].CreationTimestamp) })
	var sb strings.Builder
	w := tabwriter.NewWriter(&sb, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CREATED (UTC)\tNAME\tSIGNER\tREQUESTOR\tCONDITIONS\tCERTIFICATE")
	var all []byte
	for i := range l.Items {
		r := &l.Items[i]
		var conds []string
		for _, cd := range r.Status.Conditions {
			conds = append(conds, string(cd.Type)+"("+cd.Reason+")")
		}
		issued := "none"
		if len(r.Status.Certificate) > 0 {
			issued = "issued"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.CreationTimestamp.UTC().Format("15:04:05"), r.Name, r.Spec.SignerName, r.Spec.Username, strings.Join(conds, ","), issued)
		b, err := toYAML(r)
		if err != nil {
			c.errorf("CSR %s: %v", r.Name, err)
			continue
		}
		all = append(append(all, "---\n"...), b...)
	}
	w.Flush()
	c.WriteFile("csrs.txt", "CertificateSigningRequests, one a line", []byte(sb.String()))
	c.WriteFile("csrs.yaml", "CertificateSigningRequests, in full", all)
}

// Events writes the events of namespace ns (metav1.NamespaceAll: every
// namespace) oldest first: events/<ns>.txt.
func (c *Collector) Events(ctx context.Context, ns string) {
	if c.client == nil {
		return
	}
	l, err := c.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		c.errorf("events of %q: %v", ns, err)
		return
	}
	name, what := ns, "events of namespace "+ns
	if ns == metav1.NamespaceAll {
		name, what = "all-namespaces", "events of every namespace"
	}
	c.WriteFile(filepath.Join("events", name+".txt"), what, []byte(eventTable(l.Items, true)))
}

// CopyFile copies src to name, its last maxBytes only when maxBytes > 0
// (the first line kept then says what was cut).
func (c *Collector) CopyFile(name, what, src string, maxBytes int64) {
	c.CopyFrom(name, what, src, 0, maxBytes)
}

// CopyFrom copies src from byte offset (the size it had when a test
// started, say) to name, keeping the last maxBytes when maxBytes > 0.
func (c *Collector) CopyFrom(name, what, src string, offset, maxBytes int64) {
	f, err := os.Open(src)
	if err != nil {
		c.errorf("%s: %v", what, err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		c.errorf("%s: %v", what, err)
		return
	}
	start, prefix := offset, ""
	if start > st.Size() { // rotated or truncated since
		start = 0
	}
	if maxBytes > 0 && st.Size()-start > maxBytes {
		start = st.Size() - maxBytes
		prefix = fmt.Sprintf("[evidence: the first %d bytes of %s are not copied]\n", start, src)
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		c.errorf("%s: %v", what, err)
		return
	}
	b, err := io.ReadAll(f)
	if err != nil {
		c.errorf("%s: %v", what, err)
		return
	}
	c.WriteFile(name, what+" ("+src+")", append([]byte(prefix), b...))
}

// CopyTree copies the regular files under src into the directory name,
// keeping their relative paths; a file whose copy already has the same
// size is skipped, so calling it again (a log keeper's sync) is cheap.
func (c *Collector) CopyTree(name, what, src string) {
	c.treeMu.Lock()
	defer c.treeMu.Unlock()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a directory removed while walking: keep what is there
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return nil
		}
		dst := filepath.Join(c.dir, name, rel)
		si, err1 := os.Stat(p)
		di, err2 := os.Stat(dst)
		if err1 == nil && err2 == nil && si.Size() == di.Size() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		c.WriteFile(filepath.Join(name, rel), what, b)
		return nil
	})
	if err != nil {
		c.errorf("%s (%s): %v", what, src, err)
	}
}

// Close writes index.txt (every file with its size and what it holds) and,
// when something could not be collected, errors.txt; it returns the files'
// relative names, sorted. It may be called again after more files were
// written: the index is rewritten.
func (c *Collector) Close() []string {
	c.mu.Lock()
	if len(c.errs) > 0 {
		c.files["errors.txt"] = "what could not be collected, and why"
	}
	errs := append([]string(nil), c.errs...)
	var names []string
	for n := range c.files {
		names = append(names, n)
	}
	files := make(map[string]string, len(c.files))
	for k, v := range c.files {
		files[k] = v
	}
	c.mu.Unlock()
	if len(errs) > 0 {
		_ = os.WriteFile(filepath.Join(c.dir, "errors.txt"), []byte(strings.Join(errs, "\n")+"\n"), 0o644)
	}
	sort.Strings(names)
	var sb strings.Builder
	w := tabwriter.NewWriter(&sb, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "# Evidence collected %s into %s\n", time.Now().UTC().Format(time.RFC3339), c.dir)
	for _, n := range names {
		size := int64(-1)
		if st, err := os.Stat(filepath.Join(c.dir, n)); err == nil {
			size = st.Size()
		}
		fmt.Fprintf(w, "%s\t%d\t%s\n", n, size, files[n])
	}
	w.Flush()
	_ = os.WriteFile(filepath.Join(c.dir, "index.txt"), []byte(sb.String()), 0o644)
	return names
}
