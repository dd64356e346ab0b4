package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// MaxHolderPage is the largest page of GET /v1/holders.
const MaxHolderPage = 1000

// HolderStatus is a registered holder as GET /v1/holders shows it: the
// purge work it still owes, when it last acked, and its latest inventory.
type HolderStatus struct {
	Holder    string    `json:"holder"`
	CreatedAt time.Time `json:"created_at"`
	// PendingArtifacts counts what Purges lists for the holder: its
	// artifacts still to purge and ack, one per artifact and open forget;
	// PendingForgets the open forgets they belong to.
	PendingArtifacts int `json:"pending_artifacts"`
	PendingForgets   int `json:"pending_forgets"`
	// LastAckAt is when shredd received the holder's latest signed ack,
	// nil when it never sent one.
	LastAckAt *time.Time `json:"last_ack_at"`
	// Inventory is the holder's latest inventory report, nil when it never
	// reported one.
	Inventory *InventoryStatus `json:"inventory"`
}

// InventoryStatus is what shredd kept of a holder's latest inventory:
// UnknownArtifacts counts the artifacts never registered for it and those
// it acked as purged but still listed; a report that is not Clean blocks
// every open forget.
type InventoryStatus struct {
	ReportedAt       time.Time `json:"reported_at"`
	Items            int       `json:"items"`
	UnknownArtifacts int       `json:"unknown_artifacts"`
	UnknownKinds     int       `json:"unknown_kinds"`
	Clean            bool      `json:"clean"`
}

// HolderPage is one page of holders; Next is the cursor of the following
// page, "" on the last one.
type HolderPage struct {
	Holders []HolderStatus `json:"holders"`
	Next    string         `json:"next"`
}

// Holders returns a page of the registered holders, by id (register or
// audit scope; a holder-bound token sees its own holder only): at most
// limit of them (1 to MaxHolderPage; 0: the server's default, the most),
// after cursor (the Next of the page before; "" for the first page).
// AllHolders walks every page.
func (c *Client) Holders(ctx context.Context, limit int, cursor string) (HolderPage, error) {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := "/v1/holders"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out HolderPage
	_, _, err := c.call(ctx, http.MethodGet, path, nil, &out)
	if out.Holders == nil {
		out.Holders = []HolderStatus{}
	}
	return out, err
}

// AllHolders returns every registered holder the token may see, walking
// the pages of Holders (MaxHolderPage at a time).
func (c *Client) AllHolders(ctx context.Context) ([]HolderStatus, error) {
	var all []HolderStatus
	cursor := ""
	for {
		p, err := c.Holders(ctx, MaxHolderPage, cursor)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Holders...)
		if p.Next == "" {
			return all, nil
		}
		cursor = p.Next
	}
}
