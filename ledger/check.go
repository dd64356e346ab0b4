package ledger

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shredd/shredd"
)

// Check is what a ledger's check found (CheckLedger, and
// erasure's Recovery.ReconcileLedger before it repairs): the intact part, the damaged tail,
// the lines the head kept with the root counts that the file lacks, and
// which of the forgets involved the database holds.
type Check struct {
	Path    string
	Header  *Header       // nil: a new file, or a damaged header
	Lines   int           // intact lines
	Seq     uint64        // the last intact line's sequence number
	Damaged []DamagedLine // the damaged tail, in file order
	// Kept is the head kept with the root (nil: none); KeptErr says why it
	// could not be read (the check was then made without it).
	Kept    *Head
	KeptErr error
	// Records: the root store keeps forget records (keystore.RecordKeeper)
	// and so no head; the check is made without one (Kept is nil).
	Records bool
	// Missing counts the lines the kept head counts beyond the intact
	// part (some may be in Damaged).
	Missing uint64
	// Replaced: the file is not the ledger whose head the root keeps (it
	// was deleted, replaced or its header damaged).
	Replaced bool
	// Fork: the file's line at the kept head's number is another line.
	Fork bool
	// HeadGone: the database records that a head was kept with the root,
	// and the root holds none (removed from root.key, or an older root
	// file): what the ledger lacks cannot be told, so it counts as a loss.
	HeadGone bool
	// InDB counts the damaged lines' forgets the database holds.
	InDB int
	// Reapply counts authentic damaged lines whose forgets the database
	// lacks: they are committed again from the line.
	Reapply int
	// Lost lists the forget ids that damaged lines name, unauthenticated,
	// and the database lacks.
	Lost []string
	// LostUnknown counts lines (damaged without a readable forget id, or
	// missing) that the database's committed forgets cannot account for.
	LostUnknown int
	// DBMissing counts the committed forgets of the database that the
	// ledger lacks (recorded again from the database).
	DBMissing int
}

// Damage reports whether the ledger is not whole: a damaged tail, lines
// missing, replaced, or forked from the head kept with the root.
func (c Check) Damage() bool {
	return len(c.Damaged) > 0 || c.Missing > 0 || c.Replaced || c.Fork || c.HeadGone
}

// Loss reports whether repairing the ledger may lose a forget that the
// database does not hold.
func (c Check) Loss() bool { return len(c.Lost) > 0 || c.LostUnknown > 0 || c.Fork || c.HeadGone }

// Summary is the check's verdict in one sentence.
func (c Check) Summary() string {
	var what []string
	if n := len(c.Damaged); n > 0 {
		what = append(what, fmt.Sprintf("%d damaged line(s) from byte %d", n, c.Damaged[0].Offset))
	}
	if c.Replaced {
		what = append(what, fmt.Sprintf("it is not the ledger whose head the root keeps (instance %.8s…, %d lines)", c.Kept.Instance, c.Kept.Lines))
	} else if c.Missing > 0 {
		what = append(what, fmt.Sprintf("%d line(s) the root store recorded (through line %d) are missing", c.Missing, c.Kept.Seq))
	}
	if c.Fork {
		what = append(what, fmt.Sprintf("its line %d differs from the one the root store recorded", c.Kept.Seq))
	}
	if c.HeadGone {
		what = append(what, "the database records that the ledger's head was kept with the root, and the root holds none")
	}
	if len(what) == 0 {
		return "the ledger is whole"
	}
	s := strings.Join(what, "; ")
	if !c.Loss() {
		return s + "; the database holds every forget involved: nothing is lost"
	}
	var lost []string
	if len(c.Lost) > 0 {
		lost = append(lost, fmt.Sprintf("%d forget(s) the database lacks (%s)", len(c.Lost), strings.Join(c.Lost, ", ")))
	}
	if c.LostUnknown > 0 {
		lost = append(lost, fmt.Sprintf("%d line(s) whose forget cannot be read and that the database cannot account for", c.LostUnknown))
	}
	if c.Fork {
		lost = append(lost, "the lines after the fork")
	}
	if c.HeadGone {
		lost = append(lost, "any line the head would have counted (unknown)")
	}
	return s + "; would be lost: " + strings.Join(lost, " and ")
}

// Report is the check's full text, for shredd ledger check.
func (c Check) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "forget ledger %s\n", c.Path)
	switch h := c.Header; {
	case h != nil:
		fmt.Fprintf(&b, "  header: instance %s, created %s\n", h.Instance, time.Unix(0, h.CreatedAt).UTC().Format(time.RFC3339))
		if h.Compacted != nil {
			fmt.Fprintf(&b, "  compacted: %d line(s) dropped, through line %d (destroyed root versions)\n", h.Compacted.Lines, h.Compacted.Seq)
		}
	case len(c.Damaged) > 0:
		fmt.Fprintln(&b, "  header: damaged")
	default:
		fmt.Fprintln(&b, "  header: none (a new, empty ledger)")
	}
	fmt.Fprintf(&b, "  intact: %d line(s), through line %d\n", c.Lines, c.Seq)
	switch {
	case c.Records:
		fmt.Fprintln(&b, "  head kept with the root: none (the root store keeps the forget records instead; a start commits again what the database lacks from them)")
	case c.KeptErr != nil:
		fmt.Fprintf(&b, "  head kept with the root: not read (%v)\n", c.KeptErr)
	case c.Kept == nil:
		fmt.Fprintln(&b, "  head kept with the root: none yet")
	default:
		fmt.Fprintf(&b, "  head kept with the root: instance %s, line %d, %d line(s)\n", c.Kept.Instance, c.Kept.Seq, c.Kept.Lines)
	}
	for _, d := range c.Damaged {
		id := d.Forget
		if id == "" {
			id = "(unreadable)"
		}
		fmt.Fprintf(&b, "  damaged at byte %d: line %d, forget %s: %s\n", d.Offset, d.Seq, id, d.Reason)
	}
	if c.DBMissing > 0 {
		fmt.Fprintf(&b, "  the database holds %d committed forget(s) the ledger lacks: they are recorded again from it\n", c.DBMissing)
	}
	fmt.Fprintf(&b, "  verdict: %s\n", c.Summary())
	return b.String()
}

// Known is what the check needs of a forget of the database.
type Known struct {
	State     string // the forget's state
	Committed int64  // when it committed (Unix ns; 0: not yet)
	Alias     bool   // merged into the kept forget of its subject (migration 0007): present as that one
}

// Compacted reports whether a forget of the database missing from the
// ledger was dropped by a compaction of it: committed before the newest
// line dropped, and past committed (an epoch came after it).
func Compacted(h *Header, f Known) bool {
	return h != nil && h.Compacted != nil && f.Committed <= h.Compacted.Until && f.State != shredd.StateCommitted
}

// Assess checks a scan against the head kept with the root and the
// database's forgets.
func Assess(path string, sc *Scan, kept *Head, keptErr error, db map[shredd.ID]Known) Check {
	c := Check{Path: path, Header: sc.Header, Lines: len(sc.Lines), Seq: sc.seq, Damaged: sc.Damaged, Kept: kept, KeptErr: keptErr}
	inLedger := map[shredd.ID]bool{}
	for _, e := range sc.Lines {
		id, _ := shredd.ParseID(e.Forget)
		inLedger[id] = true
	}
	identified := map[shredd.ID]DamagedLine{}
	unknown := 0
	for _, d := range sc.Damaged {
		switch {
		case d.Forget == "":
			unknown++
		case !inLedger[d.id]:
			if prev, ok := identified[d.id]; !ok || d.Authentic && !prev.Authentic {
				identified[d.id] = d
			}
		}
	}
	if kept != nil {
		n := uint64(len(sc.Damaged))
		switch {
		case sc.Header == nil && len(sc.Damaged) == 0 && kept.Lines == 0 && kept.Seq == 0:
			// An empty file where the root recorded an empty ledger.
			c.Replaced = true
		case sc.Header == nil || sc.Header.Instance != kept.Instance:
			c.Replaced = true
			if kept.Lines > n {
				unknown += int(kept.Lines - n)
			}
		case kept.Seq > sc.seq:
			c.Missing = kept.Seq - sc.seq
			if c.Missing > n {
				unknown += int(c.Missing - n)
			}
		default:
			c.Fork = !headAt(sc, kept)
		}
	}
	for id, f := range db {
		if !f.Alias && !inLedger[id] && !Compacted(sc.Header, f) {
			if _, ok := identified[id]; !ok {
				c.DBMissing++
			}
		}
	}
	for id, d := range identified {
		switch _, ok := db[id]; {
		case ok:
			c.InDB++
		case d.Authentic:
			c.Reapply++
		default:
			c.Lost = append(c.Lost, id.String())
		}
	}
	slices.Sort(c.Lost)
	c.LostUnknown = max(0, unknown-c.DBMissing)
	return c
}

// headAt reports whether the scan's line at the kept head's number has the
// kept hash (true when that line was compacted away, beyond checking).
func headAt(sc *Scan, kept *Head) bool {
	first := uint64(1)
	if c := sc.Header.Compacted; c != nil {
		first = c.Seq + 1
		if kept.Seq == c.Seq {
			return kept.Hash == c.Head
		}
		if kept.Seq < c.Seq {
			// Compacted away, the header rewritten with it: beyond
			// checking (PrecheckLedger compares the compaction with the
			// root's versions instead).
			return true
		}
	}
	switch {
	case kept.Seq == 0:
		return kept.Hash == sc.headerHash
	case kept.Seq < first:
		return true
	}
	return sc.hashes[kept.Seq-first] == kept.Hash
}
