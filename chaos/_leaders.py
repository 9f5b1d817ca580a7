"""Leadership beyond election under chaos (#29): hand-overs, resigns and priority
joins, the workers' drivers and the checks.

Each worker runs two participant slots (one per client: standard and session
error policy). A slot is a succession of participants, each a
:class:`aiocoord.LeaderElection` on :data:`LEADERSHIP` with an id used once
(``<worker>-<driver>-<n>``); about one in four joins with a priority (1 to 3),
which takes leadership over from a leader of lower (or no) priority. A
participant stays 4 to 14 s: one task holds its terms (``hold()`` again after
each) and records each term (``leadership term``: its fencing token, and the
reason it ended); the slot's own task, while it leads, writes the term's token
to :data:`LEADERSHIP_STORE` in a ZooKeeper transaction guarded by the term's
fence (``leadership write``), then hands over to a random other queued
participant (``leadership hand_over``, by id), resigns (and queues again), or
writes once more; after half the hand-overs and resigns it writes once more
under the ended term's fence (``late``), which the server must refuse.
Leaving, it resigns for good if it leads (``requeue=False``), else just stops
queueing.

The invariants (registered in :data:`chaos._checks.CHECKS`):

- ``leadership.fenced``: at most one leader holds a valid fence at any time.
  The fenced writes ZooKeeper applied, in the order it applied them (their
  zxids), carry tokens that never go down, each token is one term's (one
  participant's); and no write sent after a later term had begun (a term
  with a higher token, recorded as begun before the write was sent) was
  applied: the server refused every write of a superseded term; and no late
  write (under the fence of a term its leader had ended) was applied.
- ``leadership.handover``: a hand-over target that is live leads next: after a
  hand-over that ended its term as a hand-over, the next term (the lowest
  token above the handing-over term's) is the target's, unless a fault
  overlapped the time from the hand-over to that term, or the target had
  started leaving by then.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
from collections import Counter
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

import aiocoord
from aiocoord import (
    ConnectionLossError,
    CoordinationError,
    InvalidArgumentError,
    LeaderElection,
    LeadershipLostError,
    NodeExistsError,
    NotOwnerError,
    Stat,
)

from ._history import History
from ._layout import LEADERSHIP, OP_BOUND, ROOT

if TYPE_CHECKING:
    from ._checks import Verdict
    from ._worker import Outcome, Worker

__all__ = [
    "LEADERSHIP_STORE",
    "Leadership",
    "check_fenced",
    "check_handover",
]

LEADERSHIP_STORE = f"{ROOT}/leadership-store"
"""The node every leader writes its token to, under its term's fence."""
PRIORITY_SHARE = 0.25
"""How many participants join with a priority (1 to 3)."""
LIFETIME = (4.0, 14.0)
"""Seconds a participant stays in the election."""
LEAVE_BOUND = OP_BOUND
"""Seconds a participant may take to leave (its node deleted, its terms over): the
watchdog's bound, as for any operation (a leave in an outage waits for ZooKeeper)."""


class Leadership:
    """A worker's leadership participants (see the module's docstring)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    async def start(self, clients: list[aiocoord.Client]) -> None:
        with contextlib.suppress(NodeExistsError):
            await clients[0].create(LEADERSHIP_STORE, b"0", make_parents=True)

    def drivers(
        self, clients: list[aiocoord.Client]
    ) -> list[tuple[str, Coroutine[Any, Any, None]]]:
        return [
            (f"leadership-{i}", self.slot_loop(f"leadership-{i}", client))
            for i, client in enumerate(clients)
        ]

    async def slot_loop(self, driver: str, client: aiocoord.Client) -> None:
        """One participant after another, until told to stop."""
        worker = self.worker
        rng = worker.rng(driver)
        await worker.nap(rng.uniform(0, 1.0))
        for n in itertools.count(1):
            if worker.stopping.is_set():
                return
            priority = rng.randint(1, 3) if rng.random() < PRIORITY_SHARE else None
            participant = _Participant(
                self, driver, client, f"{worker.name}-{driver}-{n}", priority
            )
            await participant.take_part(rng)
            await worker.nap(rng.uniform(0.2, 1.0))


class _Participant:
    """One participant: its terms in one task, what it does as leader in the slot's."""

    def __init__(
        self,
        owner: Leadership,
        driver: str,
        client: aiocoord.Client,
        participant_id: str,
        priority: int | None,
    ) -> None:
        from ._worker import _policy

        self.worker = owner.worker
        self.driver = driver
        self.client = client
        self.id = participant_id
        self.priority = priority
        self.policy = _policy(client)
        self.election = LeaderElection(
            client, LEADERSHIP, participant_id=participant_id, priority=priority
        )
        self.leading = asyncio.Event()
        self.between = asyncio.Event()
        """Set while no term is held (the terms task clears ``leading`` and sets it)."""
        self.between.set()
        self.leaving = False

    def args(self, **more: Any) -> dict[str, Any]:
        return {
            "driver": self.driver,
            "policy": self.policy,
            "participant": self.id,
            "priority": self.priority,
            **more,
        }

    async def take_part(self, rng: random.Random) -> None:
        """Join, act while leading for a random lifetime, leave; recorded as one
        ``leadership participate`` operation (its ``t_leave``: when leaving began)."""
        worker = self.worker
        history = worker.history
        op_id = history.invoke("leadership", "participate", **self.args())
        terms = asyncio.create_task(self.hold_terms(), name=f"leadership terms {self.id}")
        until = worker.now() + rng.uniform(*LIFETIME)
        t_leave: float | None = None
        status: Any = "ok"
        error: str | None = None
        over = False
        try:
            while not worker.stopping.is_set() and worker.now() < until and not terms.done():
                # A term can be over while ``leading`` is still set (the terms task
                # has not run yet to clear it), and ``Event.wait()`` on a set event
                # returns without yielding: waiting for ``leading`` then would spin,
                # and the terms task would never run (it stopped a whole worker for
                # 7 s, stop 39's CI). So once a term is found over, wait for its end.
                waited = self.between if over else self.leading
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(1.0, max(0.05, until - worker.now()))):
                        await waited.wait()
                over = self.leading.is_set() and not await self.lead_once(rng)
        finally:
            t_leave = worker.now()
            self.leaving = True
            try:
                async with asyncio.timeout(LEAVE_BOUND):
                    await self.leave(rng, terms)
            except TimeoutError:
                status, error = "unknown", f"leaving took over {LEAVE_BOUND:g} s"
            if terms.done() and not terms.cancelled() and terms.exception() is not None:
                status, error = "unknown", repr(terms.exception())
            history.complete(op_id, status, error=error, value={"t_leave": t_leave})

    async def hold_terms(self) -> None:
        """Hold a term, again and again (queueing again after each) until leaving;
        each term recorded with its token and why it ended."""
        worker = self.worker
        history = worker.history
        while not self.leaving:
            op_id: str | None = None
            token: int | None = None
            reason = "the participant left"
            try:
                # Not cancelled on a loss: the block says at once that it no longer
                # leads, before the hold's end gives the node up (a round trip or more).
                async with self.election.hold(cancel_on_loss=False):
                    token = self.election.fencing_token
                    op_id = history.invoke("leadership", "term", **self.args(token=token))
                    self.between.clear()
                    self.leading.set()
                    await self.election.wait_lost()
                    self.leading.clear()
                    self.between.set()
            except LeadershipLostError as lost:
                reason = lost.reason
            except ConnectionLossError:
                # ZooKeeper out of reach for a whole request timeout while queueing.
                await self.client.wait_connected()
            except aiocoord.ClientClosedError:
                return
            except CoordinationError as failure:
                from ._worker import _name

                reason = _name(failure)
                await worker.nap(0.1)  # queueing failed: not in a tight loop
            finally:
                self.leading.clear()
                self.between.set()
                if op_id is not None:
                    history.complete(op_id, "ok", value={"token": token, "reason": reason})

    async def lead_once(self, rng: random.Random) -> bool:
        """While leading: write under the fence, then hand over, resign or write again.
        After a hand-over or a resign, now and then a late write under the ended
        term's fence: the server must refuse it. False if the term was over already
        (nothing done, and nothing awaited)."""
        worker = self.worker
        try:
            # Both of the same term: no await between them.
            term = (self.election.fencing_token, self.election.fence())
        except (NotOwnerError, LeadershipLostError):
            return False
        await worker.op("leadership", "write", lambda op_id: self.write(op_id, term), **self.args())
        await worker.nap(rng.uniform(0.05, 0.4))
        if not self.leading.is_set():
            return True
        action = rng.random()
        if action < 0.5:
            ended = await worker.op(
                "leadership",
                "hand_over",
                lambda op_id: self.hand_over(op_id, rng),
                **self.args(),
            )
        elif action < 0.7:
            ended = await worker.op("leadership", "resign", self.resign, **self.args(requeue=True))
        else:
            await worker.nap(rng.uniform(0.05, 0.4))
            return True
        if ended.status == "ok" and rng.random() < 0.5:
            await worker.op(
                "leadership", "write", lambda op_id: self.write(op_id, term), **self.args(late=True)
            )
        return True

    async def write(self, op_id: str, term: tuple[int, aiocoord.Fence]) -> Outcome:
        """The term's token to the store node, in a transaction guarded by the term's fence."""
        from ._worker import Outcome, _name

        token, fence = term
        transaction = self.client.transaction().guard(fence)
        transaction.set(LEADERSHIP_STORE, f"{token} {self.id}".encode())
        try:
            (stat,) = await transaction.commit()
        except LeadershipLostError as error:
            return Outcome("fail", _name(error), {"token": token, "fenced": "refused"})
        except CoordinationError as error:
            return Outcome("unknown", _name(error), {"token": token})
        assert isinstance(stat, Stat)
        return Outcome("ok", None, {"token": token, "fenced": "applied", "zxid": stat.mzxid})

    async def hand_over(self, op_id: str, rng: random.Random) -> Outcome:
        """To a random other queued participant, by id (``wait=False``: returns once
        our node is gone)."""
        from ._worker import Outcome, _name

        value: dict[str, Any] = {}
        try:
            value["token"] = self.election.fencing_token
            found = await self.election.participants()
            others = sorted({p.id for p in found if p.id != self.id})
            if not others:
                return Outcome("fail", "nobody else queued", value)
            value["to"] = to = rng.choice(others)
            await self.election.hand_over(to=to, wait=False)
        except (InvalidArgumentError, NotOwnerError, LeadershipLostError) as error:
            return Outcome("fail", _name(error), value)
        except CoordinationError as error:
            return Outcome("unknown", _name(error), value)
        return Outcome("ok", None, value)

    async def resign(self, op_id: str, *, requeue: bool = True) -> Outcome:
        from ._worker import Outcome, _name

        value: dict[str, Any] = {}
        try:
            value["token"] = self.election.fencing_token
            await self.election.resign(requeue=requeue)
        except (NotOwnerError, LeadershipLostError) as error:
            return Outcome("fail", _name(error), value)
        except CoordinationError as error:
            return Outcome("unknown", _name(error), value)
        return Outcome("ok", None, value)

    async def leave(self, rng: random.Random, terms: asyncio.Task[None]) -> None:
        """Resign for good if leading (half the time: else the terms task is simply
        cancelled, which gives the term up too), then stop queueing."""
        if self.leading.is_set() and rng.random() < 0.5:
            await self.worker.op(
                "leadership",
                "resign",
                lambda op_id: self.resign(op_id, requeue=False),
                **self.args(requeue=False),
            )
        terms.cancel()
        await asyncio.gather(terms, return_exceptions=True)


# --- the checks -----------------------------------------------------------------------------


def _terms(history: History) -> dict[int, Any]:
    """Every recorded term by its token (a token recorded twice is the fenced check's
    problem; the first is kept)."""
    terms: dict[int, Any] = {}
    for op in history.of("leadership", "term"):
        token = op.args.get("token")
        if token is not None:
            terms.setdefault(int(token), op)
    return terms


def check_fenced(history: History, verdict: Verdict) -> None:
    """At most one leader holds a valid fence at any time (see the module docstring)."""
    applied: list[tuple[int, int, str, str, float]] = []
    refused = late = 0
    for op in history.of("leadership", "write"):
        if op.args.get("late"):
            late += 1
            if op.get("fenced") == "applied":
                verdict.problem(
                    f"{op.id} (token {op.get('token')}) was applied, though sent under the "
                    "fence of a term its leader had ended (handed over or resigned)"
                )
        if op.get("fenced") == "applied":
            applied.append(
                (
                    int(op.get("zxid")),
                    int(op.get("token")),
                    str(op.args.get("participant")),
                    op.id,
                    op.invoke,
                )
            )
        elif op.get("fenced") == "refused":
            refused += 1
    applied.sort()
    for (zxid_a, token_a, _who_a, op_a, _ta), (
        zxid_b,
        token_b,
        _who_b,
        op_b,
        _tb,
    ) in itertools.pairwise(applied):
        if token_b < token_a:
            verdict.problem(
                f"{op_b} (token {token_b}) was applied at zxid {zxid_b:#x}, after {op_a} "
                f"(token {token_a}) at {zxid_a:#x}: a superseded leader's write got through"
            )
    owners: dict[int, set[str]] = {}
    for op in history.of("leadership", "term"):
        if op.args.get("token") is not None:
            owners.setdefault(int(op.args["token"]), set()).add(str(op.args.get("participant")))
    for _zxid, token, who, _op, _t in applied:
        owners.setdefault(token, set()).add(who)
    for token, who in sorted(owners.items()):
        if len(who) > 1:
            verdict.problem(f"token {token} is several participants' term: {sorted(who)}")
    # A write sent once a later term had begun must have been refused.
    began = sorted((op.invoke, token) for token, op in _terms(history).items())
    for _zxid, token, _who, op_id, sent in applied:
        later = [(t, b) for t, b in began if b > token and t < sent]
        if later:
            t, b = later[0]
            verdict.problem(
                f"{op_id} (token {token}, sent at {sent:.3f}) was applied although the term "
                f"with token {b} had begun at {t:.3f}"
            )
    verdict.checked = len(applied)
    verdict.counts = {
        "fenced writes applied": len(applied),
        "refused (the term was over)": refused,
        "late writes under an ended term's fence": late,
        "terms": len(owners),
    }


def check_handover(history: History, verdict: Verdict) -> None:
    """A hand-over target that is live leads next (see the module docstring)."""
    terms = _terms(history)
    tokens = sorted(terms)
    leaving: dict[str, float] = {}
    for op in history.of("leadership", "participate"):
        t_leave = op.get("t_leave")
        leaving[str(op.args.get("participant"))] = (
            float(t_leave) if t_leave is not None else float("inf")
        )
    judged = excused = ended_otherwise = unjudged = 0
    excuses: Counter[str] = Counter()
    for op in history.of("leadership", "hand_over"):
        if op.status != "ok" or op.get("to") is None or op.get("token") is None:
            continue
        token, to = int(op.get("token")), str(op.get("to"))
        term = terms.get(token)
        if term is None or term.get("reason") != f"handed over to {to!r}":
            ended_otherwise += 1  # a priority take-over or a loss came first
            continue
        following = [t for t in tokens if t > token]
        if not following:
            unjudged += 1  # the run ended first
            continue
        nxt = terms[following[0]]
        judged += 1
        if nxt.args.get("participant") == to:
            continue
        faults = [
            str(f.get("kind"))
            for f in history.faults
            if float(f.get("t", 0.0)) <= nxt.invoke
            and float(f.get("end", f.get("t", 0.0))) >= op.invoke
        ]
        if faults:
            excused += 1
            excuses.update(faults)
            continue
        if leaving.get(to, float("inf")) <= nxt.invoke:
            excused += 1
            excuses["target left"] += 1
            continue
        verdict.problem(
            f"{op.id}: term {token} handed over to {to}, but {nxt.args.get('participant')} "
            f"led next (term {following[0]}, from {nxt.invoke:.3f}), with no fault in between"
        )
    verdict.checked = judged
    verdict.counts = {
        "hand-overs judged": judged,
        "excused (a fault, or the target leaving)": excused,
        "term ended otherwise first": ended_otherwise,
        "run ended first": unjudged,
        **{f"excused by {kind}": n for kind, n in sorted(excuses.items())},
    }
