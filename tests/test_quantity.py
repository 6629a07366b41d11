"""Kubernetes quantities in base units: one parser for files, flags and simulate's traces."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strata_policy.model.quantity import (
    BINARY_SUFFIXES,
    MAX_AMOUNT,
    QuantityError,
    format_quantity,
    parse_quantity,
)
from strata_policy.model.resources import parse_resources

GI = 2**30


@pytest.mark.parametrize(
    ("resource", "text", "expected"),
    [
        pytest.param("cpu", "4", 4000, id="cpu: whole CPUs"),
        pytest.param("cpu", 4, 4000, id="cpu: a YAML integer"),
        pytest.param("cpu", "500m", 500, id="cpu: millicores"),
        pytest.param("cpu", "0.5", 500, id="cpu: a fraction"),
        pytest.param("cpu", "1.25", 1250, id="cpu: three decimals"),
        pytest.param("cpu", "+2", 2000, id="cpu: an explicit plus"),
        pytest.param("cpu", "2e0", 2000, id="cpu: exponent form"),
        pytest.param("memory", "4Gi", 4 * GI, id="memory: binary suffix"),
        pytest.param("memory", "384Gi", 384 * GI, id="memory: simulate's node size"),
        pytest.param("memory", "1.5Gi", 3 * GI // 2, id="memory: fractional binary"),
        pytest.param("memory", "1G", 10**9, id="memory: decimal suffix"),
        pytest.param("memory", "128974848", 128974848, id="memory: plain bytes"),
        pytest.param("memory", "129e6", 129 * 10**6, id="memory: exponent"),
        pytest.param("memory", "123Mi", 123 * 2**20, id="memory: Mi"),
        pytest.param("gpu", "1", 1000, id="gpu: one device"),
        pytest.param("gpu", "0.5", 500, id="gpu: half a device"),
        pytest.param("gpu", "250m", 250, id="gpu: milli suffix"),
        pytest.param("gpu", "8", 8000, id="gpu: eight devices"),
        pytest.param("rdma", "3", 3, id="scalar: its own unit"),
        pytest.param("ephemeral-storage", "10Gi", 10 * GI, id="scalar: with a suffix"),
        pytest.param("cpu", "0", 0, id="zero"),
    ],
)
def test_parse(resource: str, text: str | int, expected: int) -> None:
    """A quantity is read in its resource's base unit."""
    assert parse_quantity(resource, text) == expected


@pytest.mark.parametrize(
    ("resource", "text", "message"),
    [
        pytest.param("memory", "4Gx", "unknown suffix 'Gx'; did you mean 'Gi'?", id="bad suffix"),
        pytest.param("memory", "4GB", "did you mean 'G'?", id="GB is not a suffix"),
        pytest.param("memory", "4GiB", "did you mean 'Gi'?", id="GiB is not a suffix"),
        pytest.param("memory", "4gi", "did you mean 'Gi'?", id="case matters"),
        pytest.param("memory", "4 Gi", "unknown suffix ' Gi'", id="no space"),
        pytest.param("cpu", "-1", "negative", id="negative"),
        pytest.param("cpu", "0.0005", "whole number of base units", id="below a millicore"),
        pytest.param("cpu", "0.5m", "the smallest cpu amount is 1m", id="half a millicore"),
        pytest.param("memory", "0.5", "whole number of base units", id="half a byte"),
        pytest.param("memory", "500m", "whole number of base units", id="m is milli, not mega"),
        pytest.param("cpu", "four", "cannot parse", id="words"),
        pytest.param("cpu", "", "cannot parse", id="empty"),
        pytest.param("cpu", "1e99", "exponent out of range", id="huge exponent"),
        pytest.param("memory", "8Ei", "too large", id="beyond 2^62"),
        pytest.param("cpu", True, "expected a quantity", id="a boolean"),
        pytest.param("cpu", "1e3m", "unknown suffix 'e3m'", id="exponent and suffix"),
    ],
)
def test_refused(resource: str, text: str, message: str) -> None:
    """A bad quantity is one ValueError naming the problem, with a hint where one helps."""
    with pytest.raises(QuantityError) as caught:
        parse_quantity(resource, text)
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("gpu=8,cpu=64,memory=256Gi", {"gpu": 8000, "cpu": 64000, "memory": 256 * GI}),
        pytest.param(" gpu = 0.5 ", {"gpu": 500}, id="spaces"),
        pytest.param("", {}, id="nothing"),
    ],
)
def test_parse_resources(text: str, expected: dict[str, int]) -> None:
    """quota set's NAME=QUANTITY lists use the same parser."""
    assert parse_resources(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("gpu", "expected NAME=AMOUNT", id="no amount"),
        pytest.param("gpu=1,gpu=2", "gpu is given twice", id="twice"),
        pytest.param("memory=4GB", "memory: '4GB'", id="bad amount names its resource"),
    ],
)
def test_parse_resources_refused(text: str, message: str) -> None:
    """A bad list says which part is wrong."""
    with pytest.raises(QuantityError) as caught:
        parse_resources(text)
    assert message in str(caught.value)


RESOURCES = st.sampled_from(["cpu", "gpu", "memory", "rdma"])


@given(RESOURCES, st.integers(min_value=0, max_value=MAX_AMOUNT))
def test_round_trip(resource: str, amount: int) -> None:
    """format_quantity writes an exact quantity: parsing it gives the amount back."""
    assert parse_quantity(resource, format_quantity(resource, amount)) == amount


@given(st.integers(min_value=0, max_value=10**9))
def test_milli_suffix_is_the_base_unit(amount: int) -> None:
    """For cpu and gpu, ``Nm`` is N base units and a plain N is N × 1000."""
    for resource in ("cpu", "gpu"):
        assert parse_quantity(resource, f"{amount}m") == amount
        assert parse_quantity(resource, str(amount)) == amount * 1000


@given(st.integers(min_value=0, max_value=2**20), st.sampled_from(sorted(BINARY_SUFFIXES)))
def test_binary_suffixes(count: int, suffix: str) -> None:
    """``4Gi`` is 4 × 2^30 bytes, for every binary suffix."""
    expected = count * BINARY_SUFFIXES[suffix]
    if expected <= MAX_AMOUNT:
        assert parse_quantity("memory", f"{count}{suffix}") == expected


@given(st.integers(min_value=0, max_value=999))
def test_gpu_share(milli: int) -> None:
    """``0.5`` GPU is 500 milli-GPUs: a decimal fraction of a device is exact."""
    assert parse_quantity("gpu", f"0.{milli:03d}") == milli
