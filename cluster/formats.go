package cluster

import (
	"slices"
	"strconv"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/internal/buildinfo"
)

// Mixed journal formats (a rolling upgrade). Every member advertises the journal format
// its build reads and writes (Config.Meta, buildinfo.MetaFormat). Two things follow from
// the formats of the members in the topology:
//
//   - Placement prefers readers. Proto.Actor's disthash places an identity of a kind on
//     the members whose Member.Kinds hold that kind (rendezvous hashing over them;
//     Rendezvous.memberDataByKind). The Consul provider builds those members from the
//     catalog itself, so it lists a member whose format is below the highest one among the
//     members hosting Config.JournalKinds without those kinds: every member of this build
//     reads the same catalog, so all of them place journal-reading activations on the
//     members of the newest format only, and the placement actor of an older member hands
//     over the activations it held as soon as a newer member joins (their owner moved).
//     Members all of one format are listed with their kinds, exactly as before.
//   - The lowest format is the gate of what may be written (persistence.FormatGate):
//     Node.Formats.

// memberFormat is the journal format a member advertises in meta: 1 (the format of
// builds before formats were advertised) when it advertises none or garbage.
func memberFormat(meta map[string]string) int {
	f, err := strconv.Atoi(meta[buildinfo.MetaFormat])
	if err != nil || f < 1 {
		return 1
	}
	return f
}

// formatRange is the lowest and the highest journal format the members of a topology
// advertise (zero when unknown).
type formatRange struct{ lowest, highest int }

// preferNewest returns members with the kinds of journal removed from every member whose
// format (formatOf) is below the highest format among the members hosting one of them,
// and the range of all the members' formats. Members are copied where changed, never
// modified. Without journal kinds, or with all members of one format, members come back
// as they are.
func preferNewest(members []*cluster.Member, formatOf func(id string) int, journal []string) ([]*cluster.Member, formatRange) {
	var r formatRange
	newest := 0
	for _, m := range members {
		if len(journal) > 0 && !hostsAny(m, journal) {
			continue // a program that joined only to call grains (a grain client) reads no journal
		}
		f := formatOf(m.Id)
		if r.lowest == 0 || f < r.lowest {
			r.lowest = f
		}
		r.highest = max(r.highest, f)
		if hostsAny(m, journal) {
			newest = max(newest, f)
		}
	}
	if r.lowest == r.highest || len(journal) == 0 {
		return members, r
	}
	out := make([]*cluster.Member, len(members))
	for i, m := range members {
		out[i] = m
		if formatOf(m.Id) < newest && hostsAny(m, journal) {
			c := &cluster.Member{Id: m.Id, Host: m.Host, Port: m.Port}
			for _, k := range m.Kinds {
				if !slices.Contains(journal, k) {
					c.Kinds = append(c.Kinds, k)
				}
			}
			out[i] = c
		}
	}
	return out, r
}

func hostsAny(m *cluster.Member, kinds []string) bool {
	for _, k := range kinds {
		if m.HasKind(k) {
			return true
		}
	}
	return false
}

// Formats returns the lowest and the highest journal format the members of this
// member's topology advertise (Config.Meta's buildinfo.MetaFormat; a member that
// advertises none counts as format 1). With Config.JournalKinds set, only the members
// that host one of those kinds count: a program that joined the cluster only to call
// grains (examples/grain-client) reads no journal and holds back no event. A member of the local provider, or one whose
// provider has not described the topology yet, knows only itself: both are its own.
// Cheap: the session journal's format gate calls Lowest on every append.
func (n *Node) Formats() (lowest, highest int) {
	if p, ok := n.cluster.Config.ClusterProvider.(*consulProvider); ok {
		if r := p.formatRange(); r.lowest > 0 {
			return r.lowest, r.highest
		}
	}
	own := memberFormat(n.cfg.Meta)
	return own, own
}

// LowestFormat is the lowest journal format the members advertise (Formats).
func (n *Node) LowestFormat() int {
	lowest, _ := n.Formats()
	return lowest
}
