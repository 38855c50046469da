package observe

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rrefkit/rref/internal/refview"
	"github.com/rrefkit/rref/runtime/worker"
)

// Option adds to what Serve serves.
type Option func(*options)

type options struct {
	members    []*worker.Worker
	peers      []string
	collectors []prometheus.Collector
}

// Collectors adds Prometheus collectors to /metrics beside the worker's
// own counters: a CallMetrics installed in the worker's interceptors, say.
func Collectors(cs ...prometheus.Collector) Option {
	return func(o *options) { o.collectors = append(o.collectors, cs...) }
}

// Members adds workers of this process (a NewGroup's, say) to the
// references views, beside the worker Serve is given: /debug/rrefs lists
// their snapshots too.
func Members(ws ...*worker.Worker) Option {
	return func(o *options) { o.members = append(o.members, ws...) }
}

// Peers names other members' debug listeners (host:port or a URL), whose
// snapshots the references page fetches and joins with this listener's,
// so that one page shows the whole group. /debug/rrefs stays this
// listener's own, so that joining listeners never fetch one another.
func Peers(addrs ...string) Option {
	return func(o *options) { o.peers = append(o.peers, addrs...) }
}

// peerTimeout bounds the page's wait for a peer's listener: a member that
// does not answer is listed as unreachable, and the page shows the rest.
const peerTimeout = 5 * time.Second

// maxInlineTrees is how many values' fork trees the page draws when it
// groups by value; each further value links to its own page.
const maxInlineTrees = 20

// RefsViewPath is the references page; refview.Path serves the JSON.
const RefsViewPath = "/debug/rrefs/view"

// refsServer serves the references of the workers of this process, and
// joins those of peers' listeners on its page.
type refsServer struct {
	workers []*worker.Worker
	peers   []string
	client  *http.Client
}

// local takes the snapshots of this process's workers.
func (s *refsServer) local(ctx context.Context) (refview.Doc, error) {
	var d refview.Doc
	for _, w := range s.workers {
		snap, err := w.Refs(ctx)
		if err != nil {
			return d, err
		}
		d.Members = append(d.Members, snap)
	}
	return d, nil
}

func (s *refsServer) serveJSON(rw http.ResponseWriter, r *http.Request) {
	d, err := s.local(r.Context())
	if err != nil {
		http.Error(rw, err.Error(), http.StatusServiceUnavailable)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	json.NewEncoder(rw).Encode(d)
}

// pageData is what the page template shows.
type pageData struct {
	Query       refview.Query
	Counts      refview.Counts
	MemberNames []string
	Unreachable []string
	Taken       time.Time
	Members     []refview.Member // grouped by member
	Values      []valueBlock     // grouped by value, or the one value asked for
	Focus       string           // the value asked for (?value=ID)
	MoreTrees   int              // values past maxInlineTrees, drawn on their own pages
	TreeLimit   int
}

type valueBlock struct {
	*refview.Value
	Tree *refview.Tree
}

func (s *refsServer) servePage(rw http.ResponseWriter, r *http.Request) {
	q, err := refview.ParseQuery(r.FormValue("by"), r.FormValue("sort"), r.FormValue("type"), r.FormValue("site"))
	if err != nil {
		http.Error(rw, "rref observe: "+strings.TrimPrefix(err.Error(), "refview: "), http.StatusBadRequest)
		return
	}
	d, err := s.local(r.Context())
	if err != nil {
		http.Error(rw, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if len(s.peers) > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), peerTimeout)
		peers, _ := refview.FetchAll(ctx, s.client, s.peers) // each failure is in peers.Unreachable
		cancel()
		d = refview.Merge(d, peers)
	}
	g := refview.Join(d)
	data := pageData{Query: q, Counts: g.Count(), Unreachable: g.Unreachable, Taken: time.Now(), Focus: r.FormValue("value"), TreeLimit: maxInlineTrees}
	for _, m := range g.Members {
		data.MemberNames = append(data.MemberNames, m.Name)
	}
	switch {
	case data.Focus != "":
		v := g.Value(data.Focus)
		if v == nil {
			http.Error(rw, fmt.Sprintf("rref observe: no value %q among members %s", data.Focus, strings.Join(data.MemberNames, ", ")), http.StatusNotFound)
			return
		}
		t, _ := g.Tree(v.ID)
		data.Values = []valueBlock{{v, &t}}
	case q.By == refview.ByValue:
		for i, v := range g.ValuesBy(q) {
			b := valueBlock{Value: v}
			if i < maxInlineTrees {
				t, _ := g.Tree(v.ID)
				b.Tree = &t
			} else {
				data.MoreTrees++
			}
			data.Values = append(data.Values, b)
		}
	default:
		data.Members = g.MembersBy(q)
	}
	var buf bytes.Buffer
	if err := refsPage.Execute(&buf, data); err != nil {
		http.Error(rw, "rref observe: the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "text/html; charset=utf-8")
	rw.Write(buf.Bytes())
}

//go:embed refs.html
var refsHTML string

var refsPage = template.Must(template.New("refs").Funcs(template.FuncMap{
	"short":     refview.Short,
	"shortSite": refview.ShortSite,
	"age":       refview.Age,
	"size":      refview.Size,
	"join":      strings.Join,
	"stateClass": func(s any) string {
		return "st-" + strings.ReplaceAll(fmt.Sprint(s), " ", "-")
	},
	"holders": func(fs []worker.KnownFork) string {
		var hs []string
		for _, f := range fs {
			if !slices.Contains(hs, f.Holder) {
				hs = append(hs, f.Holder)
			}
		}
		return strings.Join(hs, ", ")
	},
	"lentTo": func(ls []worker.LentCopy) string {
		var to []string
		for _, l := range ls {
			to = append(to, l.To)
		}
		return strings.Join(to, ", ")
	},
	"states": func(c refview.Counts) string {
		var parts []string
		for _, st := range []worker.RefState{worker.RefAwaiting, worker.RefConfirmed, worker.RefPinned, worker.RefReleasing, worker.RefOrphaned, worker.RefCut} {
			if n := c.ByState[st]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, st))
			}
		}
		return strings.Join(parts, ", ")
	},
	"nodeWidth":  func() int { return refview.NodeWidth },
	"nodeHeight": func() int { return refview.NodeHeight },
}).Parse(refsHTML))

// errNoWorker: Serve needs a worker to serve.
var errNoWorker = errors.New("rref observe: no worker to serve")
