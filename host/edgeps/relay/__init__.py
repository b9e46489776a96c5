"""`edgeps relay`: one site's boards served locally, one worker of the central job.

A relay is two existing parts joined by one `fold.Round`:

- **Downstream** it is a parameter server for the site's boards on the site
  broker: the core ``ParameterServer`` with the site's own policy, driven by
  the runtime ``Coordinator`` (ingest, peers, outbox, accounting: what
  `edgeps serve` runs), in `site`. Its optimizer folds instead of stepping,
  and its releases after a push are held until new central parameters come.
- **Upstream** it is the shared firmware ``Worker`` on the central broker,
  whose trainer (`upstream.RelayTrainer`) has the usual interface: the
  central parameters land in ``params_buffer()``; ``step()`` fans them out
  to the site as the site PS's parameters, waits for the site round and
  returns the boards' gradients folded into one: their sample-weighted mean,
  with the total samples and the mean loss.

What the central host sees
--------------------------
One worker, the relay's id, with its own key. Its *speed*: one push per site
round; the compute time it reports (and the monitor's iteration time, from
release to push) is the site round time: fan-out, the slowest board the site
policy waits for (compute plus both site link legs), the last push. Its
*samples*: the sum over the round. Its *staleness*: that of an ordinary
worker whose iteration lasts one site round, ``V_apply - v``, where ``v`` is
the central version the round's boards were released with: every gradient of
a round under site BSP (and every gradient that is not *late*) was computed
on exactly those parameters. A *late* gradient (a board that pushed after its
round closed, possible under site K-of-N, SSP, DSP or ASP) is folded into the
next round and is one round staler than the push announces: its true
staleness is ``V_apply - v_prev``; the relay counts them (``late``). The
central message rate per site is one UPDATE (and one release) per round
instead of one per board push: divided by the fan-in, the boards per round.

How the two policies compose
----------------------------
The site policy decides when a round closes: the round closes at the first
release of a board after at least one fold. Site BSP closes it when every
live board pushed (a dead board leaves the barrier after the site liveness
timeout), so a round is one synchronous large-batch gradient of the site's
live boards; site K-of-N closes at the K-th push; site ASP closes at the
first push, so a round holds whatever arrived while the relay waited for the
central release (at least one gradient); ``min_fold`` (``--min-fold K``) makes
a round wait for K gradients, or one from every live board when fewer are live,
whatever the site policy. Whatever closed it, every board
waits for the next central parameters before it computes again, so each board
gives at most one gradient per central round trip of its relay.

The central policy then treats the relays as its workers: central BSP steps
once every relay pushed (one synchronous step over all sites, like BSP over
all boards with the site barriers nested in it); central ASP applies each
site's round when it comes (sites asynchronous with each other, boards within
a site as the site policy says); central SSP/DSP bound the lead of a fast
site over a slow one in rounds (DSP normalises by each relay's measured round
time, so a site with fast boards contributes more rounds). A board's gradient
is stale by its site staleness (0 under site BSP, one round when late) plus
its relay's central staleness. Liveness nests too: the relay heartbeats the
central host while it waits for its round, and leaves when the central job
ends (STOP ``done``), stopping its boards with MODEL ``done`` and a STOP each.

Local rounds and the job's card: the central WELCOME's local rounds, lr,
scaler and class names go into every site WELCOME, so the boards train as
the central job asks; under local rounds they push deltas, which a round
folds as it folds gradients (`fold`) and the relay pushes as one delta.

Keys: the relay holds the central key of its own worker id (or the central
master, from which it derives it) and the master key of its site, from which
each board's key is derived, as `edgeps serve` does.
"""

from edgeps.relay.fold import Folded, Round
from edgeps.relay.runner import Relay, RelayConfig, RelaySummary

__all__ = ["Folded", "Relay", "RelayConfig", "RelaySummary", "Round"]
