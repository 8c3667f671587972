package node

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/buildinfo"
)

// clusterConfig is cc with the labels the member advertises (buildinfo's version and
// journal format, and the node's start time) added to its Meta, and the session kind as
// the kind that reads the journal (placed on the members of the newest journal format
// during a rolling upgrade, fcluster.Config.JournalKinds).
//
// A journal format already in cc.Meta is kept: it is how tests make a member advertise
// another format than its build's (a member of an older or newer release, in one
// process). Nothing else sets it.
func (n *Node) clusterConfig(cc fcluster.Config) fcluster.Config {
	meta := make(map[string]string, len(cc.Meta)+3)
	maps.Copy(meta, cc.Meta)
	meta[buildinfo.MetaVersion] = buildinfo.String()
	if _, ok := meta[buildinfo.MetaFormat]; !ok {
		meta[buildinfo.MetaFormat] = buildinfo.FormatString()
	}
	meta[buildinfo.MetaStarted] = n.startedAt.Format(time.RFC3339Nano)
	cc.Meta = meta
	cc.JournalKinds = append(slices.Clip(cc.JournalKinds), session.KindName)
	return cc
}

// lowestFormat is the lowest journal format the members of the cluster advertise (the
// sessions' format gate, persistence.FormatGate): the member's view once it joined,
// else the format this member advertises.
func (n *Node) lowestFormat() int {
	if m := n.gateMember.Load(); m != nil {
		return m.LowestFormat()
	}
	if f, err := strconv.Atoi(n.cfg.Cluster.Meta[buildinfo.MetaFormat]); err == nil {
		return f
	}
	return buildinfo.Format
}

// maxMoves bounds the takeovers moveLog keeps.
const maxMoves = 64

// move is a takeover of a departed member's sessions.
type move struct {
	sessions int
	at       time.Time
}

// moveLog keeps the latest takeovers of departed members' sessions by address (a
// bounded map: the oldest is dropped past maxMoves).
type moveLog struct {
	mu sync.Mutex
	m  map[string]move
}

// note records that sessions of the member at addr were taken over at at.
func (l *moveLog) note(addr string, sessions int, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]move{}
	}
	if _, ok := l.m[addr]; !ok && len(l.m) >= maxMoves {
		oldest := ""
		for a, mv := range l.m {
			if oldest == "" || mv.at.Before(l.m[oldest].at) {
				oldest = a
			}
		}
		delete(l.m, oldest)
	}
	mv := l.m[addr]
	mv.sessions += sessions
	mv.at = at
	l.m[addr] = mv
}

// get returns the takeover of addr's sessions, if any.
func (l *moveLog) get(addr string) (move, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	mv, ok := l.m[addr]
	return mv, ok
}

// leaseCountTimeout bounds the lease count GET /v1/cluster asks the index for.
const leaseCountTimeout = 3 * time.Second

// ClusterInfo answers GET /v1/cluster: this member, the members it sees with what they
// advertise and what they hold in the session index, and the members that left.
func (n *Node) ClusterInfo(ctx context.Context) (gateway.ClusterInfo, error) {
	if n.member == nil {
		return gateway.ClusterInfo{}, errors.New("the node has not joined a cluster")
	}
	cctx, cancel := context.WithTimeout(ctx, leaseCountTimeout)
	counts, err := n.journal.LeaseCounts(cctx)
	cancel()
	if err != nil {
		n.log.Warn("GET /v1/cluster: cannot count the members' leases; showing none", "error", err)
	}
	info := gateway.ClusterInfo{Node: n.member.Address(), Version: buildinfo.String(), JournalFormat: buildinfo.Format}
	for _, m := range n.member.Members() {
		cm := gateway.ClusterMember{Address: m.Address, ID: m.ID, Self: m.Self, Health: "passing"}
		cm.Version, cm.JournalFormat, cm.StartedAt = advertised(m.Meta)
		if !m.Passing {
			cm.Health = "failing"
		}
		if m.Self && n.member.Ready() != nil {
			cm.Health = "failing"
		}
		c := counts[m.Address]
		cm.SessionsHosted, cm.LeasesHeld = c.Running, c.Leases
		info.Members = append(info.Members, m.Address)
		info.MemberDetails = append(info.MemberDetails, cm)
	}
	deps := n.member.Departures()
	for i := len(deps) - 1; i >= 0; i-- {
		d := deps[i]
		dm := gateway.DepartedMember{Address: d.Address, ID: d.ID, LeftAt: d.At.UTC(), How: d.How}
		dm.Version, dm.JournalFormat, dm.StartedAt = advertised(d.Meta)
		if mv, ok := n.moves.get(d.Address); ok {
			at := mv.at.UTC()
			dm.SessionsMoved, dm.MovedAt = mv.sessions, &at
		}
		info.Departed = append(info.Departed, dm)
	}
	return info, nil
}

// advertised reads the build labels a member advertises (buildinfo's meta keys).
func advertised(meta map[string]string) (version string, format int, started *time.Time) {
	version = meta[buildinfo.MetaVersion]
	format, _ = strconv.Atoi(meta[buildinfo.MetaFormat])
	if t, err := time.Parse(time.RFC3339Nano, meta[buildinfo.MetaStarted]); err == nil {
		started = &t
	}
	return version, format, started
}
