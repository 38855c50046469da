package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rrefkit/rref/internal/refview"
	"github.com/rrefkit/rref/runtime/worker"
)

func init() {
	register(command{"refs", "show who holds which reference in a running group, from its members' debug listeners", runRefs})
}

func runRefs(env *Env, args []string) int {
	fs := newFlags(env, "refs", "[-by member|value] [-sort age|size] [-type T] [-site S] [-json] ADDR[,ADDR...]", `
refs fetches what each member of a running group owns and holds from its
debug listener (runtime/observe: observe.Serve, at ADDR, host:port or a URL;
it reads ADDR/debug/rrefs), joins the members on their ids and prints, by
member, each value it owns (type, size, state, age, forks known, copies in
flight, fetches waiting, creation site) and each reference it holds (owner,
state: awaiting, confirmed, pinned, releasing, orphaned or cut; copies lent),
or, by value, each value with every member's references to it. Types, sizes
and sites of references come from their values' owners; creation sites are
recorded by members started with worker.Config.RecordRefSites.

Exit status 1 if a listener does not answer (what the others said is
printed).`)
	by := fs.String("by", refview.ByMember, "group by member or by value")
	sortBy := fs.String("sort", refview.SortAge, "order: age (oldest first) or size (largest first)")
	typ := fs.String("type", "", "show only values and references whose Go type contains this (ignoring case)")
	site := fs.String("site", "", "show only values and references whose creation site contains this (ignoring case)")
	asJSON := fs.Bool("json", false, "print the grouped view as JSON")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the listeners")
	if st := parseFlags(env, fs, args); st >= 0 {
		return st
	}
	q, err := refview.ParseQuery(*by, *sortBy, *typ, *site)
	if err != nil {
		return usageError(env, "refs", "-%s", strings.TrimPrefix(err.Error(), refview.ErrQuery.Error()+": "))
	}
	if *timeout <= 0 {
		return usageError(env, "refs", "-timeout %v: want a positive duration", *timeout)
	}
	if fs.NArg() == 0 {
		return usageError(env, "refs", "name the members' debug listeners: ADDR[,ADDR...]")
	}
	var addrs []string
	for _, arg := range fs.Args() {
		for _, a := range strings.Split(arg, ",") {
			if a = strings.TrimSpace(a); a == "" {
				return usageError(env, "refs", "%q: an empty address in the list", arg)
			}
			addrs = append(addrs, a)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	client := &http.Client{}
	defer client.CloseIdleConnections()
	doc, fetchErr := refview.FetchAll(ctx, client, addrs)
	g := refview.Join(doc)
	switch {
	case len(g.Members) == 0 && fetchErr != nil:
		// Nothing answered: the reasons below are the whole answer.
	case *asJSON:
		err = writeRefsJSON(env.Stdout, g, q)
	default:
		err = writeRefs(env.Stdout, g, q)
	}
	if err != nil {
		return failed(env, "refs", err)
	}
	if fetchErr != nil {
		for _, u := range g.Unreachable {
			fmt.Fprintf(env.Stderr, "rrefgen refs: not reached: %s\n", strings.TrimPrefix(u, "refview: "))
		}
		return ExitFail
	}
	return ExitOK
}

func writeRefsJSON(w io.Writer, g *refview.Group, q refview.Query) error {
	out := struct {
		Members     []refview.Member `json:"members,omitempty"`
		Values      []*refview.Value `json:"values,omitempty"`
		Unreachable []string         `json:"unreachable,omitempty"`
	}{Unreachable: g.Unreachable}
	if q.By == refview.ByValue {
		out.Values = g.ValuesBy(q)
	} else {
		out.Members = g.MembersBy(q)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// writeRefs prints a group as tables: a summary line, then each member's
// values and references, or each value and the references to it.
func writeRefs(w io.Writer, g *refview.Group, q refview.Query) error {
	c := g.Count()
	var names []string
	for _, m := range g.Members {
		names = append(names, m.Name)
	}
	fmt.Fprintf(w, "%d members (%s), %d values owned, %d references, %d held by programs", c.Members, strings.Join(names, ", "), c.Values, c.References, c.Held)
	for _, st := range []worker.RefState{worker.RefAwaiting, worker.RefConfirmed, worker.RefPinned, worker.RefReleasing, worker.RefOrphaned, worker.RefCut} {
		if n := c.ByState[st]; n > 0 {
			fmt.Fprintf(w, ", %d %s", n, st)
		}
	}
	fmt.Fprintf(w, "; %d copies in flight\n", c.Lent)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if q.By == refview.ByValue {
		for _, v := range g.ValuesBy(q) {
			fmt.Fprintf(tw, "\nvalue %s on %s: %s\n", refview.Short(v.ID), v.Owner, describeValue(v))
			if len(v.Refs) == 0 {
				continue
			}
			fmt.Fprintln(tw, "  member\tfork\tcopied from\tstate\theld\tlent to\tfetching\tage\tsite")
			for _, r := range v.Refs {
				from := "(its Remote)"
				if r.Parent != "" {
					from = refview.Short(r.Parent)
					if r.From != "" {
						from += " (" + r.From + ")"
					}
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Member, refview.Short(r.Fork), from, refState(r.HeldRefInfo),
					held(r.Held), lentTo(r.Lent), r.Fetching, refview.Age(r.Age), dash(refview.ShortSite(r.Site)))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		return tw.Flush()
	}
	for _, m := range g.MembersBy(q) {
		sites := ""
		if !m.Sites {
			sites = " (creation sites not recorded)"
		}
		fmt.Fprintf(tw, "\nmember %s%s: %d values owned, %d references held\n", m.Name, sites, len(m.Values), len(m.Refs))
		if len(m.Values) > 0 {
			fmt.Fprintln(tw, "  value\ttype\tsize\tstate\tage\tprogram\tforks\tin flight\twaiting\tsite")
			for _, v := range m.Values {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", refview.Short(v.ID), dash(v.Type), refview.Size(v.Size), valueState(v),
					refview.Age(v.Age), v.Program, len(v.Forks), v.Lent, v.WaitingFetches, dash(refview.ShortSite(v.Site)))
			}
		}
		if len(m.Refs) > 0 {
			if len(m.Values) > 0 {
				fmt.Fprintln(tw)
			}
			fmt.Fprintln(tw, "  reference to\tfork\towner\tstate\theld\tlent to\tfetching\ttype\tsize\tage\tsite")
			for _, r := range m.Refs {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", refview.Short(r.Value), refview.Short(r.Fork), r.Owner, refState(r.HeldRefInfo),
					held(r.Held), lentTo(r.Lent), r.Fetching, dash(r.Type), refview.Size(r.Size), refview.Age(r.Age), dash(refview.ShortSite(r.Site)))
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// describeValue is a value's line in the by-value listing.
func describeValue(v *refview.Value) string {
	if !v.Seen {
		return "not seen (its owner is not among these members, or freed it)"
	}
	parts := []string{valueState(v)}
	if v.Type != "" {
		parts = append(parts, v.Type)
	}
	parts = append(parts, refview.Size(v.Size), "age "+refview.Age(v.Age))
	if v.Site != "" {
		parts = append(parts, "made at "+refview.ShortSite(v.Site))
	}
	parts = append(parts, fmt.Sprintf("%d forks known, %d copies in flight, %d fetches waiting", len(v.Forks), v.Lent, v.WaitingFetches))
	return strings.Join(parts, ", ")
}

func valueState(v *refview.Value) string {
	s := string(v.State)
	if v.Function != "" {
		s += " (" + v.Function + ")"
	}
	if v.Failure != "" {
		s += ": " + v.Failure
	}
	return s
}

func refState(r worker.HeldRefInfo) string {
	s := string(r.State)
	if r.Cut != "" && r.State != worker.RefOrphaned {
		s += " (" + r.Cut + ")"
	}
	if r.TimedOut {
		s += " (timed out)"
	}
	return s
}

func held(h bool) string {
	if h {
		return "yes"
	}
	return "released"
}

func lentTo(ls []worker.LentCopy) string {
	var to []string
	for _, l := range ls {
		to = append(to, l.To)
	}
	return dash(strings.Join(to, ","))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
