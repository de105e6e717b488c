"""What the README tells an operator matches the code: retention figures are the
config's defaults, and the sections a new user looks for are there."""

from __future__ import annotations

import re

from mqstore import StoreConfig
from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(title)
    end = README.find("\n**", start + len(title))
    return README[start : end if end > 0 else None]


def test_the_retention_paragraph_states_the_configs_defaults() -> None:
    text = _section("**Retention.**")
    cfg = StoreConfig()
    assert f"`file_reserved_time_hours` ({cfg.file_reserved_time_hours})" in text
    assert f'`delete_when` hour (`"{cfg.delete_when}"`' in text
    assert f"`disk_max_used_space_ratio` ({cfg.disk_max_used_space_ratio} %)" in text
    forcibly = round(cfg.disk_space_clean_forcibly_ratio * 100)
    assert f"`disk_space_clean_forcibly_ratio` ({forcibly} %)" in text
    assert "whether or not anyone consumed them" in text


def test_the_sizing_paragraph_states_the_reserve_ceiling() -> None:
    text = _section("**Sizing a store.**")
    chunk_mib = StoreConfig().commitlog_reserve_chunk >> 20
    assert f"`commitlog_reserve_chunk`, {chunk_mib} MiB" in text


def test_the_readme_says_how_to_point_java_ali_ons_and_mqadmin_at_the_broker() -> None:
    assert 'setNamesrvAddr("127.0.0.1:10911")' in README
    assert re.search(r"nameSrv: '127\.0\.0\.1:10911'", README)
    assert "mqadmin updateTopic -n 127.0.0.1:10911" in README


def test_the_readme_says_how_to_fail_over_to_a_slave() -> None:
    text = _section("**Failing over to a slave.**")
    assert "--store SLAVE_DIR --role ASYNC_MASTER" in text


def test_the_readme_names_fuse3_for_the_power_cut_layer() -> None:
    assert "`fuse3` (`apt-get install fuse3`" in README
