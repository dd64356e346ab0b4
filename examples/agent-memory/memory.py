"""A small but real agent memory whose every tier goes through shredd.

- EpisodicStore: the agent's episodic log in SQLite; each row is sealed
  through shredd under the user's subject id (only the ciphertext is kept).
- Summarizer: a deterministic rolling summarizer (no model) that reads a
  user's rows and seals the summary in one unit of work, whose write names
  the leases of its reads, so the summary's lineage is theirs.
- EmbeddingIndex: hashed bag-of-words vectors kept in *plaintext* for
  search (as an ANN index keeps them). Each vector is registered with
  shredd as a plaintext-held artifact of the holder "ann-index-1"; on purge
  work the index deletes the vectors and signs the ack (shredd.holder).
- Replica: a second SQLite file that copies the ciphertexts, as a lagging
  read replica or a backup would.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sqlite3
from collections import Counter
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import shredd
from shredd.holder import HolderKit

KIND_EPISODIC = "episodic"
KIND_SUMMARY = "summary"
KIND_EMBEDDING = "embedding"
KINDS = (KIND_EPISODIC, KIND_SUMMARY, KIND_EMBEDDING)

_WORD = re.compile(r"[a-z][a-z']+")
_STOP = frozenset("the a an and or of to in on at for with is are was were be i my me it that this "
                  "she he her his they their we our you your has have had not but so as by from".split())


def words(text: str) -> List[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


class EpisodicStore:
    """EpisodicStore keeps sealed episodic memories, one row each."""

    def __init__(self, path: str, client: shredd.Client) -> None:
        self.c = client
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS episodes (artifact TEXT PRIMARY KEY, user TEXT NOT NULL, "
                        "seq INTEGER NOT NULL, ciphertext TEXT NOT NULL)")

    def add(self, user: str, text: str) -> str:
        sealed = self.c.sealing.encrypt(KIND_EPISODIC, text.encode("utf-8"), subject=user,
                                        context=b"app=agent-memory")
        n = self.db.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
        self.db.execute("INSERT INTO episodes VALUES (?, ?, ?, ?)", (sealed.artifact, user, n, sealed.ciphertext))
        self.db.commit()
        return sealed.artifact

    def rows(self, user: Optional[str] = None) -> List[Tuple[str, str]]:
        q = "SELECT artifact, ciphertext FROM episodes"
        a: Tuple[str, ...] = ()
        if user is not None:
            q, a = q + " WHERE user = ?", (user,)
        return list(self.db.execute(q + " ORDER BY seq", a))

    def read(self, artifact: str) -> str:
        ct = self.db.execute("SELECT ciphertext FROM episodes WHERE artifact = ?", (artifact,)).fetchone()[0]
        with self.c.leases.open(ct, context=b"app=agent-memory") as d:
            return d.plaintext.decode("utf-8")


class Summarizer:
    """Summarizer makes deterministic rolling summaries of episodic rows."""

    HOLDER = "summarizer-1"

    def __init__(self, client: shredd.Client, store: EpisodicStore) -> None:
        self.c = client
        self.store = store
        self.summaries: Dict[str, Tuple[str, str]] = {}  # name -> (artifact, ciphertext)

    @staticmethod
    def summarize(texts: Sequence[str]) -> str:
        top = [w for w, _ in sorted(Counter(w for t in texts for w in words(t)).items(), key=lambda x: (-x[1], x[0]))[:4]]
        return "%d memories; topics: %s; latest: %s" % (len(texts), ", ".join(top), texts[-1] if texts else "-")

    def load(self, rows: Sequence[Tuple[str, str]]) -> Tuple[List[str], shredd.Unit]:
        """load decrypts rows as the summarizer in a new unit of work (a
        worker that loaded data and will write a derivative later): the unit
        holds the leases, so a forget of a subject of those rows waits until
        write closes the unit, and write names them."""
        unit = self.c.unit()
        texts: List[str] = []
        try:
            for _, ct in rows:
                d = unit.decrypt(ct, context=b"app=agent-memory", holder=self.HOLDER)
                texts.append(d.plaintext.decode("utf-8"))
        except BaseException as e:
            unit.__exit__(type(e), e, e.__traceback__)  # releases what was read; e stays the error raised
            raise
        return texts, unit

    def write(self, name: str, texts: Sequence[str], unit: shredd.Unit) -> str:
        """write seals the summary of texts in the unit that loaded them: the
        write names the unit's leases (each acts as a parent), and the unit
        ends, releasing them."""
        with unit:
            sealed = unit.encrypt(KIND_SUMMARY, self.summarize(texts).encode("utf-8"), holder=self.HOLDER)
        self.summaries[name] = (sealed.artifact, sealed.ciphertext)
        return sealed.artifact

    def roll(self, name: str, user: Optional[str] = None) -> str:
        """roll summarizes the rows of user (None: everybody's: a shared,
        aggregate summary) in one go."""
        texts, unit = self.load(self.store.rows(user))
        return self.write(name, texts, unit)

    def read(self, name: str) -> str:
        # A read in a unit of its own: no later write of the summarizer,
        # each in its own unit, answers for it.
        with self.c.unit() as u:
            return u.decrypt(self.summaries[name][1]).plaintext.decode("utf-8")


class EmbeddingIndex:
    """EmbeddingIndex keeps plaintext hashed bag-of-words vectors for search
    and is a shredd holder: it registers each vector as a plaintext-held
    artifact and purges vectors on purge work, signing the ack."""

    HOLDER = "ann-index-1"
    DIM = 64

    def __init__(self, path: str, client: shredd.Client, key: object) -> None:
        self.kit = HolderKit(client, self.HOLDER, key)
        self.reembeds = 0  # calls of reembed, refused or not
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS vectors (artifact TEXT PRIMARY KEY, record TEXT NOT NULL, "
                        "vector TEXT NOT NULL)")

    @classmethod
    def embed(cls, text: str) -> List[float]:
        v = [0.0] * cls.DIM
        for w in words(text):
            h = hashlib.sha256(w.encode("utf-8")).digest()
            v[h[0] % cls.DIM] += 1.0 if h[1] & 1 else -1.0
        n = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / n for x in v]

    def add(self, record: str, text: str) -> str:
        """add registers the vector first (Shredded when the record's
        lineage was forgotten: nothing is kept), then stores it."""
        art = self.kit.register_artifact(KIND_EMBEDDING, parents=[record])
        self.db.execute("INSERT INTO vectors VALUES (?, ?, ?)", (art.artifact, record, json.dumps(self.embed(text))))
        self.db.commit()
        return art.artifact

    def reembed(self, record: str, read: Callable[[str], str]) -> str:
        """reembed rebuilds the vector of record from its text, as after a
        change of embedding model: read(record) opens the text through
        shredd (Shredded once the record's lineage is forgotten: nothing
        is kept), then add registers and stores the new vector."""
        self.reembeds += 1
        return self.add(record, read(record))

    def vectors_of(self, records: Sequence[str]) -> List[str]:
        """vectors_of returns the vector artifacts of records, by id."""
        marks = ",".join("?" * len(records))
        return sorted(a for (a,) in self.db.execute("SELECT artifact FROM vectors WHERE record IN (%s)" % marks,
                                                      tuple(records)))

    def search(self, query: str, k: int = 3) -> List[Tuple[float, str]]:
        q = self.embed(query)
        scored = [(sum(a * b for a, b in zip(q, json.loads(v))), rec) for rec, v in
                  self.db.execute("SELECT record, vector FROM vectors")]
        return sorted(scored, reverse=True)[:k]

    def count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])

    def purge(self, work: shredd.PurgeWork) -> List[str]:
        """purge deletes the vectors of one forget's purge work and returns
        the ids it deleted: the kit signs the ack for exactly those."""
        # A vector already gone is purged too: the ack says "not held".
        self.db.executemany("DELETE FROM vectors WHERE artifact = ?", [(a,) for a in work.artifacts])
        self.db.commit()
        return list(work.artifacts)

    def inventory(self) -> shredd.InventoryReport:
        return self.kit.report_inventory([(a, KIND_EMBEDDING) for (a,) in self.db.execute("SELECT artifact FROM vectors")])


class Replica:
    """Replica copies the episodic store's ciphertexts (never plaintext)."""

    def __init__(self, path: str, client: shredd.Client) -> None:
        self.c = client
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS copies (artifact TEXT PRIMARY KEY, ciphertext TEXT NOT NULL)")

    def sync(self, store: EpisodicStore) -> int:
        rows = store.rows()
        self.db.executemany("INSERT OR IGNORE INTO copies VALUES (?, ?)", rows)
        self.db.commit()
        return len(rows)

    def read(self, artifact: str) -> str:
        ct = self.db.execute("SELECT ciphertext FROM copies WHERE artifact = ?", (artifact,)).fetchone()[0]
        with self.c.leases.open(ct, context=b"app=agent-memory") as d:
            return d.plaintext.decode("utf-8")
