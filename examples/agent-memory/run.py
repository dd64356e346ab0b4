#!/usr/bin/env python3
"""Replays the stories of shredd's design (docs/design.md, "Why this
exists") through a small agent memory (memory.py) and checks each outcome:
forget a user, watch every tier refuse or purge, the summarizer's
re-derivation refused after the barrier, the index's signed ack closing
the cascade, the forget reaching ``erased`` and its attestation verified.

    python3 examples/agent-memory/run.py

starts its own shredd (``$SHREDD_BIN``, else ``shredd`` on PATH, else built
with ``go build``) on a free 127.0.0.1 port in a temporary data directory,
with a 1 s key-cache TTL and a 3 s lease TTL so that the forget is erased
within seconds. Exit status 0 only when every expectation held.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from typing import Callable, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
try:
    import shredd
except ImportError:  # run from a checkout without installing the client
    sys.path.insert(0, os.path.join(REPO, "clients", "python"))
    import shredd
import shredd.verify as sv
from shredd.holder import HolderKit

from memory import KINDS, EmbeddingIndex, EpisodicStore, Replica, Summarizer

ALICE, BOB = "alice@example.com", "bob@example.com"
MEMORIES = [
    (ALICE, "Alice prefers green tea in the morning."),
    (BOB, "Bob is allergic to peanuts."),
    (ALICE, "Alice is planning a trip to Lisbon in May."),
    (ALICE, "Alice asked to move her dentist appointment to Tuesday."),
    (BOB, "Bob prefers black coffee and early meetings."),
]


class Failed(Exception):
    pass


def say(msg: str = "") -> None:
    print(msg, flush=True)


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise Failed(what)


def short(i: str) -> str:
    # Ids are time-ordered (48-bit milliseconds first): their tail tells them apart.
    return "…" + i[-8:]


def refused(what: str, fn: Callable[[], object]) -> None:
    """refused runs fn and expects 410 shredded."""
    try:
        fn()
    except shredd.Shredded as e:
        say("  %-44s refused: %d %s" % (what, e.status, e.code))
        return
    raise Failed("%s was not refused after the forget" % what)


class Server:
    """Server runs shredd for the example."""

    def __init__(self, binary: str) -> None:
        self.bin = binary
        self.tmp = tempfile.mkdtemp(prefix="agent-memory-")
        self.dir = os.path.join(self.tmp, "shredd-data")
        self.log = open(os.path.join(self.tmp, "shredd.log"), "wb")
        self.proc = subprocess.Popen([binary, "serve", "--data-dir", self.dir, "--addr", "127.0.0.1:0",
                                      "--cache-ttl", "1s", "--lease-ttl", "3s"], stdout=self.log, stderr=subprocess.STDOUT)
        self.url = ""
        deadline = time.monotonic() + 20
        while not self.url:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise Failed("shredd did not start:\n" + self.logs())
            for line in self.logs().splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("msg") == "listening":
                    self.url = "http://" + rec["addr"]
            time.sleep(0.02)
        with open(os.path.join(self.dir, "admin.token")) as f:
            self.admin = f.read().strip()

    def logs(self) -> str:
        with open(os.path.join(self.tmp, "shredd.log"), "rb") as f:
            return f.read().decode("utf-8", "replace")

    def token(self, name: str, scopes: str, holder: Optional[str] = None) -> str:
        cmd = [self.bin, "token", "create", "--name", name, "--scopes", scopes, "--data-dir", self.dir]
        if holder:
            cmd += ["--holder", holder]
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()[0]

    def close(self, keep: bool) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        if keep:
            say("(kept %s)" % self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def find_binary(out_dir: str) -> str:
    b = os.environ.get("SHREDD_BIN") or shutil.which("shredd")
    if b:
        return b
    if not shutil.which("go"):
        raise Failed("no shredd binary: set SHREDD_BIN, put shredd on PATH, or install Go to build it")
    b = os.path.join(out_dir, "shredd")
    say("building shredd (go build ./cmd/shredd) ...")
    subprocess.run(["go", "build", "-o", b, "./cmd/shredd"], cwd=REPO, check=True)
    return b


def replay(srv: Server, work: str) -> None:
    admin = shredd.Client(srv.url, srv.admin)
    app = shredd.Client(srv.url, srv.token("agent-memory", "encrypt,decrypt"))
    # The summarizer reads and writes: a token of its own, whose reads only
    # its own writes answer for (docs/clients.md, "What a read costs a writer").
    summarizer = shredd.Client(srv.url, srv.token("summarizer-1", "encrypt,decrypt"))
    index_client = shredd.Client(srv.url, srv.token("ann-index-1", "register", holder=EmbeddingIndex.HOLDER))
    dpo = shredd.Client(srv.url, srv.token("privacy-office", "forget,audit"))

    say("shredd %s (key cache TTL 1s, lease TTL 3s)" % srv.url)
    for k in KINDS:
        admin.kinds.put(k)
    store = EpisodicStore(os.path.join(work, "episodic.db"), app)
    summ = Summarizer(summarizer, store)
    index = EmbeddingIndex(os.path.join(work, "index.db"), index_client, HolderKit.generate_key())
    index.kit.register(admin)
    replica = Replica(os.path.join(work, "replica.db"), app)

    say("\n1. the agent remembers (every row sealed through shredd)")
    recs: Dict[str, List[str]] = {}
    for user, text in MEMORIES:
        a = store.add(user, text)
        recs.setdefault(user, []).append(a)
        index.add(a, text)
        say("  episodic %s  %-18s %s" % (short(a), user, text))
    expect(index.count() == len(MEMORIES), "a vector per memory")
    say("  index: %d plaintext vectors, each registered as a plaintext-held artifact of %s"
        % (index.count(), EmbeddingIndex.HOLDER))
    prof = summ.roll("alice-profile", ALICE)
    team = summ.roll("team-digest")
    say("  summary %s  alice-profile: %s" % (short(prof), summ.read("alice-profile")))
    say("  summary %s  team-digest (both users: an aggregate): %s" % (short(team), summ.read("team-digest")))
    copied = replica.sync(store)
    expect(copied == len(MEMORIES), "the replica copies every row")
    say("  replica: copied %d ciphertexts" % copied)
    hits = index.search("green tea morning")
    expect(hits[0][1] == recs[ALICE][0], "the index finds Alice's tea memory")
    say("  search 'green tea morning' -> record %s (score %.2f)" % (short(hits[0][1]), hits[0][0]))

    say("\n2. a summarizer worker loads Alice's rows (3 leases) to roll her profile again ...")
    texts, unit = summ.load(store.rows(ALICE))
    expect(len(unit.leases) == 3, "three leases, held by the worker's unit of work")
    alice_vectors = index.vectors_of(recs[ALICE])
    expect(len(alice_vectors) == 3, "the index holds a vector per Alice record")

    say("\n3. dry run of forget(alice)")
    pv = dpo.forgets.preview(ALICE)
    c = pv.counts
    say("  would make unreadable: %d artifacts: %d direct, %d derived, %d collateral, %d plaintext-held"
        % (c.total, c.direct, c.derived, c.collateral, c.plaintext_held))
    for pa in pv.artifacts:
        if pa.collateral:
            say("  collateral: %s %s also carries %d other subject(s): rebuild it for them"
                % (pa.kind, short(pa.artifact), pa.other_subjects))
    expect(c.direct == 3 and c.plaintext_held == 3 and c.collateral >= 1, "the dry run lists the cascade")

    say("\n4. forget(alice)")
    f = dpo.forgets.forget(ALICE)
    salt = f.commitment_salt
    expect(f.state == "committed" and len(salt) == 64, "the forget commits and hands out its salt")
    say("  forget %s %s, barrier %d; commitment salt kept by the privacy office" % (short(f.id), f.state, f.barrier))

    say("\n5. every tier after the barrier")
    refused("episodic store: Alice's row", lambda: store.read(recs[ALICE][0]))
    refused("replica: its copy of Alice's row", lambda: replica.read(recs[ALICE][0]))
    refused("summary: alice-profile (derivative)", lambda: summ.read("alice-profile"))
    refused("aggregate: team-digest (collateral)", lambda: summ.read("team-digest"))
    refused("summarizer: re-derivation from old leases", lambda: summ.write("alice-profile-2", texts, unit))
    held = index.count()
    refused("index: re-embed from the replica's copy", lambda: index.reembed(recs[ALICE][1], replica.read))
    refused("index: new vector of Alice's record", lambda: index.add(recs[ALICE][2], "Lisbon in May"))
    expect(index.reembeds == 1, "the index's re-embed ran")
    expect(index.count() == held and index.vectors_of(recs[ALICE]) == alice_vectors,
           "neither the re-embed nor the new vector kept a vector")
    say("  index: re-embed ran once and was refused; still %d vectors, none added" % index.count())
    hits = index.search("green tea morning")
    expect(hits[0][1] == recs[ALICE][0], "the plaintext vector is still there before the purge")
    st = dpo.forgets.verify(f.id)
    cc = st.condition("cascade_closed")
    expect(cc is not None and cc.status != "ok", "cascade_closed waits for the index's ack")
    say("  index: still holds Alice's plaintext vectors (search finds %s): cascade_closed %s"
        % (short(hits[0][1]), cc.status if cc else "?"))
    say("  forget is %s; pending: %s" % (st.state, ", ".join(x.name for x in st.conditions + st.verification if x.status != "ok")))

    say("\n6. the index takes its purge work, deletes the vectors and signs the ack")
    outcomes = index.kit.purge(index.purge)
    expect(len(outcomes) == 1 and outcomes[0].forget == f.id, "purge work for this forget, once")
    o = outcomes[0]
    ack = o.ack
    if ack is None:
        raise Failed("the index's ack was not accepted: %s" % o.error)
    expect(sorted(o.purged) == alice_vectors, "the index purged exactly Alice's 3 vectors")
    expect(sorted(ack.closed) == alice_vectors and ack.missing == [], "the ack closed exactly those 3, none missing")
    say("  purge work for forget %s: %d vectors deleted; ack closed %d, missing %d"
        % (short(o.forget), len(o.purged), len(ack.closed), len(ack.missing)))
    inv = index.inventory()
    expect(inv.clean and inv.items == 2, "the index's inventory is clean (Bob's 2 vectors)")
    hits = index.search("green tea morning")
    expect(all(h[1] in recs[BOB] for h in hits), "the index no longer answers with Alice's vectors")
    say("  inventory: %d vectors held, all registered; search 'green tea morning' -> %s (Bob's)"
        % (inv.items, short(hits[0][1])))

    say("\n7. epoch, then verification")
    e = admin.epoch()
    say("  epoch %d: root v%d, destroyed %s" % (e.epoch, e.root_version, e.retired_versions))
    t0 = time.monotonic()
    f = dpo.forgets.wait(f.id, "erased", timeout=30, interval=0.25)
    say("  forget %s erased %.1fs after the epoch: %s" % (short(f.id), time.monotonic() - t0,
                                                          ", ".join("%s %s" % (x.name, x.status) for x in f.verification)))

    say("\n8. the attestation, checked offline")
    att = dpo.forgets.attestation(f.id)
    pub_path = os.path.join(srv.dir, "attestation.pub")
    with open(pub_path, "rb") as fh:
        v = sv.verify_attestation(att, fh.read(), subject=ALICE, salt=salt, forget=f.id)
    ok = sum(1 for s in v.conditions.values() if s == "ok")
    expect(ok == 5, "five conditions ok")
    acks = v.holder_acks
    expect(len(acks) == 1 and acks[0]["holder"] == EmbeddingIndex.HOLDER, "one holder ack, the index's")
    expect(base64.b64decode(acks[0]["public_key"]) == index.kit.public_key,
           "the ack in the attestation is signed with the key the index registered")
    expect(sorted(acks[0]["artifacts"]) == alice_vectors, "the attested ack names Alice's 3 vectors")
    say("  python: signature ok (key %s...), claim ok, %d/5 conditions ok, %d holder ack(s) verified, commitment opens"
        % (v.key_id[:16], ok, len(acks)))
    say("  holder ack: %s, key %s... (the index's), %d vectors" % (acks[0]["holder"], index.kit.public_key.hex()[:16],
                                                                 len(acks[0]["artifacts"])))
    att_path = os.path.join(work, "alice.dsse.json")
    subj_path, salt_path = os.path.join(work, "subject"), os.path.join(work, "salt")
    for p, b in ((att_path, att), (subj_path, ALICE.encode()), (salt_path, salt.encode())):
        with open(p, "wb") as fh:
            fh.write(b)
    r = subprocess.run([srv.bin, "verify", att_path, "--key", pub_path, "--subject-file", subj_path,
                        "--salt-file", salt_path], capture_output=True, text=True)
    last = [l for l in r.stdout.splitlines() if l.strip()][-1:] or [r.stderr.strip()]
    expect(r.returncode == 0, "shredd verify accepts the attestation:\n" + r.stdout + r.stderr)
    say("  shredd verify: " + last[0])
    exp = dpo.forgets.export(f.id)
    vkey = admin.log.key()
    n = 0
    files: Dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(exp), mode="r:gz") as tf:
        for m in tf.getmembers():
            fh2 = tf.extractfile(m) if m.isfile() else None
            if fh2 is not None:
                files[m.name.split("/", 1)[1]] = fh2.read()
    for name in sorted(files):
        if name.startswith("entry-") and name.endswith(".json"):
            sv.check_inclusion(files[name], files[name[:-5] + ".tlog-proof"], vkey)
            n += 1
    expect(n >= 4, "the export holds the forget's log entries")
    say("  export: %d bytes, %d log entries each included in the signed checkpoint" % (len(exp), n))

    say("\n9. Bob is untouched; the aggregate is rebuilt for him")
    expect(store.read(recs[BOB][0]) == MEMORIES[1][1], "Bob's row still opens")
    say("  episodic %s: %s" % (short(recs[BOB][0]), store.read(recs[BOB][0])))
    alive = [(a, ct) for a, ct in store.rows() if a in recs[BOB]]
    texts, unit = summ.load(alive)
    team2 = summ.write("team-digest", texts, unit)
    digest = summ.read("team-digest")
    expect(digest.startswith("2 memories;") and "alice" not in digest, "the rebuilt aggregate is Bob's alone")
    say("  summary %s team-digest rebuilt: %s" % (short(team2), digest))
    say("\nOK: every way back to Alice's data is closed, and the attestation says so.")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (databases, shredd's data and log)")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="agent-memory-work-")
    srv = None
    ok = False
    try:
        srv = Server(find_binary(work))
        replay(srv, work)
        ok = True
    except (Failed, shredd.Error) as e:
        say("\nFAILED: %s" % e)
        if srv is not None:
            say("--- shredd log (tail) ---\n" + "\n".join(srv.logs().splitlines()[-20:]))
    finally:
        if srv is not None:
            srv.close(args.keep)
        if args.keep:
            say("(kept %s)" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
