package client

import (
	"bytes"
	"context"
	"errors"
	"strconv"
)

// The transparency log's calls (docs/transparency.md), audit scope. They
// return the server's text byte for byte: the checks belong to whoever
// trusts the log's key, offline, with package translog
// (translog.CheckProof, translog.ParseConsistencyProof and
// translog.CheckConsistency, translog.OpenCheckpoint) or any C2SP
// implementation. The client itself checks nothing, so that it stays
// free of the log's dependencies.

// LogKey returns the log's signed-note verifier key (the one line of
// log.vkey, without its newline). Compare it with the key the operator
// published before trusting anything it verifies.
func (c *Client) LogKey(ctx context.Context) (string, error) {
	out, err := c.getBytes(ctx, "/v1/log/key")
	return string(bytes.TrimRight(out, "\n")), err
}

// InclusionProof returns the c2sp.org/tlog-proof@v1 proof that entry index
// is in the log, against a checkpoint of tree size size (0: the current
// tree). The proof carries the signed checkpoint it is relative to.
func (c *Client) InclusionProof(ctx context.Context, index, size int64) ([]byte, error) {
	if index < 0 || size < 0 {
		return nil, errors.New("shredd: InclusionProof: negative index or size")
	}
	path := "/v1/log/proof/" + strconv.FormatInt(index, 10)
	if size > 0 {
		path += "?size=" + strconv.FormatInt(size, 10)
	}
	return c.getBytes(ctx, path)
}

// ConsistencyProof returns the shredd/tlog-consistency@v1 proof that the
// tree of size newSize (0: the current tree) extends the tree of size
// oldSize: the check that the log never rewrote what a saved checkpoint
// showed.
func (c *Client) ConsistencyProof(ctx context.Context, oldSize, newSize int64) ([]byte, error) {
	if oldSize < 0 || newSize < 0 {
		return nil, errors.New("shredd: ConsistencyProof: negative size")
	}
	path := "/v1/log/consistency?old=" + strconv.FormatInt(oldSize, 10)
	if newSize > 0 {
		path += "&new=" + strconv.FormatInt(newSize, 10)
	}
	return c.getBytes(ctx, path)
}
