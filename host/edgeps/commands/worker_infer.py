"""`edgeps worker --infer`: predict rows with a model file, fetched if asked.

Kept apart from training, whose flags, exit codes and reachability check
it takes from ``edgeps.commands.worker``.
"""

from __future__ import annotations

import argparse
import logging
import threading

from edgeps.commands.worker import EXIT_CONFIG, EXIT_OK, EXIT_UNREACHABLE, reach
from edgeps.runtime.connection_flags import connection_options, read_worker_key
from edgeps.transport.paho_link import MqttLink

log = logging.getLogger("edgeps.commands.worker")


def run_infer(args: argparse.Namespace) -> int:
    """``--infer``: predict each row of --data; publish each with --publish."""
    from edgeps.pyworker import infer
    from edgeps.pyworker.scaling import data_cut

    job, wid = args.job, args.worker_id
    link = None
    try:
        if args.fetch:
            why = reach(args, threading.Event())
            if why is not None:
                log.error("%s; gave up after %g s", why, args.give_up)
                return EXIT_UNREACHABLE
            if not fetch_job_model(args):
                return EXIT_CONFIG
        if args.publish:
            link = MqttLink(connection_options(args), wid)
            link.connect()
        n = infer.run(
            args.model_file,
            args.data,
            job,
            wid,
            publish=(lambda t, p: link.publish(t, p, qos=0)) if link else None,
            cut=data_cut(args),
        )
    except (OSError, ValueError) as exc:
        log.error("%s", exc)
        return EXIT_CONFIG
    finally:
        if link is not None:
            link.close()
    log.info("worker %s: %d predictions from %s", wid, n, args.model_file)
    return EXIT_OK


def fetch_job_model(args: argparse.Namespace) -> bool:
    """``--fetch``: the job's current model into --model-file (it joins the
    job for one release, signed with its key, and leaves)."""
    from edgeps.pyworker.keep import fetch

    link = MqttLink(connection_options(args), args.worker_id)
    reason = fetch(
        link,
        args.job,
        args.worker_id,
        args.model_file,
        key=read_worker_key(args.hmac_key_file, args.worker_id),
        max_chunk=args.max_chunk,
        release_timeout_ms=max(1, round(args.release_timeout * 1000)),
    )
    if reason != "fetched":
        log.error("job %s gave no model (%s)", args.job, reason)
        return False
    log.info("fetched job %s's model into %s", args.job, args.model_file)
    if args.hmac_key_file is None:
        log.warning(
            "the model was fetched unsigned (no --hmac-key-file): anyone who "
            "can publish on the broker could have sent it"
        )
    return True
