// Package etcdgroup finds a group's members through etcd, as PyTorch's
// elastic rendezvous does, for deployments that already run etcd: each
// member registers its name and address under a lease, and once the group
// has its size, the first registrations, in etcd's order, are sealed into
// the group's view, which every member reads back. The view's peer list,
// the same at every member, starts the workers (worker.Start).
//
// Keys, under Config.Prefix:
//
//	PREFIX/members/NAME  the member's address, under its lease: a process
//	                     that dies frees its name when the lease runs out
//	PREFIX/view          the sealed view: a group.Membership, encoded by
//	                     the generated codec of spec/group.rspec
//
// etcd's revisions order everything: a registration's revision is its
// incarnation, and the view lists the first Size registrations by
// revision, numbered by the revision at which they were read. A name held
// by a live registration is refused at once (ErrNameTaken). A member that
// comes back after the view was sealed is not in it (ErrSealed): a running
// group admits no one yet.
//
// The etcd client lives in this package only: nothing else of rrefkit
// links it.
package etcdgroup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rrefkit/rref/generated/group"
	"github.com/rrefkit/rref/genrt"
	"github.com/rrefkit/rref/runtime/worker"
)

// DefaultTTL is a registration's lease: long against a loaded host's
// pauses between keep-alives, short against a dead member holding its name.
const DefaultTTL = 10 * time.Second

// minTTL is etcd's own floor for a lease, in whole seconds.
const minTTL = time.Second

// Errors, matched with errors.Is.
var (
	ErrConfig    = errors.New("etcdgroup: bad config")
	ErrNameTaken = errors.New("etcdgroup: name taken by a live member")
	ErrSealed    = errors.New("etcdgroup: the group's view was sealed without this member")
	ErrBadView   = errors.New("etcdgroup: the stored view cannot be read")
)

// Config is one member's rendezvous.
type Config struct {
	Client *clientv3.Client
	// Prefix holds the group's keys: one prefix, one group.
	Prefix string
	Name   string
	Addr   string // where this member accepts links (worker.Peer.Addr)
	// Size is how many members the group starts with.
	Size int
	// TTL is the registration's lease (default DefaultTTL, at least 1 s).
	TTL time.Duration
}

// Group is a member's place in a sealed view.
type Group struct {
	// Peers is the view's members, in its order: the same at every member.
	Peers []worker.Peer
	// View is the revision at which the sealed registrations were read.
	View int64
	// Incarnation is the revision of this member's registration.
	Incarnation int64

	cli   *clientv3.Client
	lease clientv3.LeaseID
	stop  context.CancelFunc
	lost  chan struct{}
	once  sync.Once
}

// Lost is closed when the registration's lease is gone (etcd unreachable
// for longer than its TTL, or revoked): another process may then take the
// name, so the member should stop.
func (g *Group) Lost() <-chan struct{} { return g.lost }

// Close revokes the registration, freeing the name at once, and stops
// keeping it alive.
func (g *Group) Close(ctx context.Context) error {
	var err error
	g.once.Do(func() {
		g.stop()
		if _, rerr := g.cli.Revoke(ctx, g.lease); rerr != nil {
			err = fmt.Errorf("etcdgroup: revoke %s's registration: %w", g.Peers[0].Name, rerr)
		}
	})
	return err
}

func (c Config) memberKey(name string) string { return c.Prefix + "/members/" + name }
func (c Config) membersPrefix() string        { return c.Prefix + "/members/" }
func (c Config) viewKey() string              { return c.Prefix + "/view" }

func (c *Config) check() error {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: no etcd client", ErrConfig)
	case c.Prefix == "" || strings.HasSuffix(c.Prefix, "/"):
		return fmt.Errorf("%w: prefix %q: want a non-empty key prefix not ending in /", ErrConfig, c.Prefix)
	case c.Name == "" || strings.Contains(c.Name, "/"):
		return fmt.Errorf("%w: member name %q: want a non-empty name without /", ErrConfig, c.Name)
	case c.Addr == "":
		return fmt.Errorf("%w: member %s has no address", ErrConfig, c.Name)
	case c.Size < 1:
		return fmt.Errorf("%w: group size %d: want at least 1", ErrConfig, c.Size)
	case c.TTL < minTTL:
		return fmt.Errorf("%w: TTL %v: etcd's leases last at least %v", ErrConfig, c.TTL, minTTL)
	}
	return nil
}

// Rendezvous registers cfg.Name and waits until the group's view is
// sealed, returning this member's place in it. Until then it watches the
// group's keys; an etcd server that restarts meanwhile is waited for. It
// returns when ctx ends, its registration revoked.
func Rendezvous(ctx context.Context, cfg Config) (*Group, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	lease, err := cfg.Client.Grant(ctx, int64(cfg.TTL/time.Second))
	if err != nil {
		return nil, fmt.Errorf("etcdgroup: %s: lease: %w", cfg.Name, err)
	}
	keep, stop := context.WithCancel(context.Background())
	g := &Group{cli: cfg.Client, lease: lease.ID, stop: stop, lost: make(chan struct{}), Peers: []worker.Peer{{Name: cfg.Name, Addr: cfg.Addr}}}
	alive, err := cfg.Client.KeepAlive(keep, lease.ID)
	if err != nil {
		stop()
		return nil, fmt.Errorf("etcdgroup: %s: keep the lease alive: %w", cfg.Name, err)
	}
	go func() {
		for range alive {
		}
		close(g.lost)
	}()
	ok := false
	defer func() {
		if !ok {
			revoke, cancel := context.WithTimeout(context.Background(), cfg.TTL)
			defer cancel()
			g.Close(revoke)
		}
	}()
	key := cfg.memberKey(cfg.Name)
	reg, err := cfg.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, cfg.Addr, clientv3.WithLease(lease.ID))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return nil, fmt.Errorf("etcdgroup: %s: register: %w", cfg.Name, err)
	}
	if !reg.Succeeded {
		holder := "?"
		if kvs := reg.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			holder = string(kvs[0].Value)
		}
		return nil, fmt.Errorf("%w: %s is registered at %s, from a process whose lease is alive (it frees the name within %v of its death)", ErrNameTaken, cfg.Name, holder, cfg.TTL)
	}
	g.Incarnation = reg.Header.Revision
	view, err := waitSealed(ctx, cfg, g.Incarnation)
	if err != nil {
		return nil, err
	}
	for _, m := range view.Members {
		g.Peers = append(g.Peers, worker.Peer{Name: m.Name, Addr: m.Addr})
	}
	g.Peers = g.Peers[1:]
	g.View = int64(view.Number)
	ok = true
	return g, nil
}

// waitSealed seals the view once Size members are registered, or reads the
// one another member sealed, and checks that it holds this registration.
func waitSealed(ctx context.Context, cfg Config, incarnation int64) (*group.Membership, error) {
	for {
		resp, err := cfg.Client.Get(ctx, cfg.Prefix+"/", clientv3.WithPrefix())
		if err != nil {
			return nil, fmt.Errorf("etcdgroup: %s: read the group: %w", cfg.Name, err)
		}
		var members []*memberKV
		var sealed []byte
		viewFound := false // an empty value is a (corrupt) view too, not none
		for _, kv := range resp.Kvs {
			switch k := string(kv.Key); {
			case k == cfg.viewKey():
				sealed, viewFound = kv.Value, true
			case strings.HasPrefix(k, cfg.membersPrefix()):
				members = append(members, &memberKV{name: strings.TrimPrefix(k, cfg.membersPrefix()), addr: string(kv.Value), rev: kv.CreateRevision})
			}
		}
		if !viewFound && len(members) >= cfg.Size {
			if sealed, err = seal(ctx, cfg, members, resp.Header.Revision); err != nil {
				return nil, err
			}
			viewFound = true
		}
		if viewFound {
			return place(cfg, sealed, incarnation)
		}
		// Fewer than Size: wait for the next change after what was read.
		w := cfg.Client.Watch(clientv3.WithRequireLeader(ctx), cfg.Prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		select {
		case <-w:
		case <-ctx.Done():
			return nil, fmt.Errorf("etcdgroup: %s: %d of %d members registered: %w", cfg.Name, len(members), cfg.Size, ctx.Err())
		}
	}
}

type memberKV struct {
	name, addr string
	rev        int64
}

// seal writes the view of the first Size registrations, unless another
// member sealed one first, and returns the view stored.
func seal(ctx context.Context, cfg Config, members []*memberKV, rev int64) ([]byte, error) {
	slices.SortFunc(members, func(a, b *memberKV) int { return cmp.Compare(a.rev, b.rev) })
	view := group.Membership{Number: uint64(rev), NextID: uint32(cfg.Size + 1)}
	for i, m := range members[:cfg.Size] {
		view.Members = append(view.Members, group.ViewMember{ID: uint32(i + 1), Name: m.name, Addr: m.addr})
	}
	b := group.AppendMembership(nil, &view)
	resp, err := cfg.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(cfg.viewKey()), "=", 0)).
		Then(clientv3.OpPut(cfg.viewKey(), string(b))).
		Else(clientv3.OpGet(cfg.viewKey())).Commit()
	if err != nil {
		return nil, fmt.Errorf("etcdgroup: %s: seal the view: %w", cfg.Name, err)
	}
	if resp.Succeeded {
		return b, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil, fmt.Errorf("%w: sealed, then gone", ErrBadView)
	}
	return kvs[0].Value, nil
}

// place checks that the stored view holds this member's registration.
func place(cfg Config, sealed []byte, incarnation int64) (*group.Membership, error) {
	view, n, err := group.ConsumeMembership(sealed, &genrt.DefaultLimits)
	if err != nil || n != len(sealed) {
		return nil, fmt.Errorf("%w: %s: %v (%d of %d bytes read)", ErrBadView, cfg.viewKey(), err, n, len(sealed))
	}
	i := slices.IndexFunc(view.Members, func(m group.ViewMember) bool { return m.Name == cfg.Name })
	if i < 0 || incarnation > int64(view.Number) {
		names := make([]string, len(view.Members))
		for j, m := range view.Members {
			names[j] = m.Name
		}
		why := "this name is not in it"
		if i >= 0 {
			why = "this registration came after it (a restart)"
		}
		return nil, fmt.Errorf("%w: %s's view (revision %d) holds %s; %s", ErrSealed, cfg.Prefix, view.Number, strings.Join(names, ", "), why)
	}
	return &view, nil
}
