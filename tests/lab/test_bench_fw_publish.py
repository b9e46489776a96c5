"""`edgeps bench fw-publish` runs end to end and reports every client."""

from __future__ import annotations

import argparse
import json

import pytest
from edgeps.lab.bench import fw_publish


@pytest.mark.integration
@pytest.mark.firmware
def test_fw_publish_json_report(capsys: pytest.CaptureFixture[str]) -> None:
    # Prepare
    parser = argparse.ArgumentParser()
    fw_publish.configure(parser)
    args = parser.parse_args(["--json", "--count", "50", "--repeat", "1"])

    # Execute
    rc = fw_publish.run(args)
    report = json.loads(capsys.readouterr().out)

    # Assert
    assert rc == 0 and report["errors"] == {}
    rows = {(r["client"], r["runtime"]) for r in report["results"]}
    assert ("edgeps mqtt", "micropython") in rows and ("edgeps mqtt", "cpython") in rows
    assert all(r["median"] > 0 for r in report["results"])


def test_bad_flags_are_rejected() -> None:
    # Prepare
    parser = argparse.ArgumentParser()
    fw_publish.configure(parser)

    # Execute / Assert
    with pytest.raises(ValueError):
        fw_publish.run(parser.parse_args(["--count", "0"]))
