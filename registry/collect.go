package registry

import "time"

// groupLinger bounds how long a group writer waits for a group to fill
// (collect). At 3 nodes on one PostgreSQL, 32 clients spread over the
// nodes made groups of about 5 registrations where one node made groups
// of 15: a third of the transactions were of one registration, and each
// transaction costs about as much CPU as 15 registrations
// (docs/performance-archive.md, "Groups that wait to fill, and statements run as
// they are").
var groupLinger = time.Millisecond

// collect returns a group for a background writer: first and what q holds
// besides, up to limit. When that is fewer than want, the writer's last
// group, it waits up to groupLinger for more, until the group is as large:
// under a steady load the last group is what arrives during a commit, so
// the wait is short, and a group of one no longer commits alone while its
// peers are a moment behind. A writer that made groups of one (want 1)
// never waits. It returns at once when q is closed.
func collect[T any](q <-chan T, first T, limit, want int) []T {
	group := []T{first}
	var deadline *time.Timer
	defer func() {
		if deadline != nil {
			deadline.Stop()
		}
	}()
	for len(group) < limit {
		select {
		case r, ok := <-q:
			if !ok {
				return group
			}
			group = append(group, r)
			continue
		default:
		}
		if len(group) >= want {
			return group
		}
		if deadline == nil {
			deadline = time.NewTimer(groupLinger)
		}
		select {
		case r, ok := <-q:
			if !ok {
				return group
			}
			group = append(group, r)
		case <-deadline.C:
			return group
		}
	}
	return group
}
