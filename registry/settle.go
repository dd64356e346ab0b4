package registry

import (
	"context"
	"time"
)

// settleInterval is how often the background settler moves staged rows.
const settleInterval = time.Second

// Settle folds the registration WAL's tail into the tables and moves every
// staged lineage and parent row into the tables by subject and by parent
// (derivation.Graph.Settle): every registration acknowledged before the
// call is then in the tables a reader by subject or by parent reads.
func (s *Registry) Settle(ctx context.Context) error {
	if err := s.Fold(ctx); err != nil { // the registration WAL's tail first
		return err
	}
	return s.graph.Settle(ctx)
}

// settleLoop settles in the background every settleInterval, until Close.
// Errors are left to the next round: staged rows are already durable, and
// readers settle again before they read.
func (s *Registry) settleLoop() {
	t := time.NewTicker(settleInterval)
	defer t.Stop()
	base, stopped := context.WithCancel(context.Background()) // cancelled by Close
	defer stopped()
	go func() {
		<-s.stop
		stopped()
	}()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(base, 30*time.Second)
		_ = s.Settle(ctx)
		cancel()
	}
}
