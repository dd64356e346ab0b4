package sqlite

/*
extern long long sqlite3_memory_used(void);
extern long long sqlite3_soft_heap_limit64(long long);
*/
import "C"

import "sync"

// HeapLimitKiB bounds SQLite's heap in this process, in KiB: the page
// caches of every connection, with their prepared statements and schemas
// (sqlite3_soft_heap_limit64). A connection's cache may grow to CacheKiB
// while the total is under the limit; past it, each connection reuses its
// least recently used pages instead of adding more. Without it the caches
// could reach MaxConns × CacheKiB, 256 MiB, the whole of the server's
// memory goal (P7, docs/performance.md "Memory"), and a long stream of
// forgets at scale fills them: each forget reads pages of its own subject
// that no later request reads again. The connections in use keep their
// hot pages; those of a cold subject are the first to go. A bulk load with a larger cache
// (storage.BulkOptions.CacheKiB) raises the limit by that cache while it
// runs.
const HeapLimitKiB = 96 << 10

// heapLimit holds the caches of the bulk loads under way, in KiB: SQLite's
// limit, one for the process, is heapLimitBase plus them.
var heapLimit struct {
	sync.Mutex
	bulk int64
}

// heapLimitBase is HeapLimitKiB; tests lower it.
var heapLimitBase int64 = HeapLimitKiB

// setHeapLimit sets SQLite's soft heap limit to the base plus the bulk
// loads' caches, after adding bulkKiB (negative when a load ends).
func setHeapLimit(bulkKiB int64) {
	heapLimit.Lock()
	defer heapLimit.Unlock()
	heapLimit.bulk += bulkKiB
	C.sqlite3_soft_heap_limit64(C.longlong((heapLimitBase + heapLimit.bulk) << 10))
}

// MemoryUsed returns the bytes of SQLite's heap in this process
// (sqlite3_memory_used): what HeapLimitKiB bounds.
func MemoryUsed() int64 { return int64(C.sqlite3_memory_used()) }

// heapLimitSet returns SQLite's soft heap limit in bytes, changing nothing.
func heapLimitSet() int64 { return int64(C.sqlite3_soft_heap_limit64(-1)) }
