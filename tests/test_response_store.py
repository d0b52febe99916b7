"""The Responses store on disk (`response_store=PATH`, `smgpy serve --response-store PATH`).

Each test starts a real server on a SQLite file, stops it, starts another on the same file and
talks to both through the official `openai` SDK, as a client that outlives a server restart would.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import openai
import pytest
import smgpy
from conftest import serve_in_thread
from engines import ScriptedEngine
from smgpy.cli import build_parser, parse_duration


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)


def ids(page: Any) -> list[str]:
    return [item.id for item in page.data]


def test_a_conversation_survives_a_restart(tmp_path: Path) -> None:
    store = tmp_path / "responses.db"
    with serve_in_thread(ScriptedEngine(["Hi", " there"]), response_store=store) as url:
        c = client(url)
        first = c.responses.create(model="scripted", input="Hello", instructions="Be brief.", store=True)
        second = c.responses.create(
            model="scripted",
            previous_response_id=first.id,
            input=[
                {"role": "user", "content": "one"},
                {"role": "user", "content": "two"},
                {"role": "user", "content": "three"},
            ],
            store=True,
        )
        before = c.responses.retrieve(second.id).model_dump()
        items_before = ids(c.responses.input_items.list(second.id, order="asc"))
    assert store.is_file() and len(items_before) == 3

    engine = ScriptedEngine(["Still", " here"])
    with serve_in_thread(engine, response_store=store) as url:
        c = client(url)
        # GET returns the same object, input_items the same items, with the same pagination.
        assert c.responses.retrieve(second.id).model_dump() == before
        assert c.responses.retrieve(first.id).output_text == "Hi there"
        assert ids(c.responses.input_items.list(second.id, order="asc")) == items_before
        assert ids(c.responses.input_items.list(second.id)) == items_before[::-1]
        page = c.responses.input_items.list(second.id, order="asc", limit=1, after=items_before[0])
        assert ids(page) == items_before[1:2] and page.has_more
        # previous_response_id continues the conversation of the last run.
        third = c.responses.create(model="scripted", previous_response_id=second.id, input="four", store=True)
        assert third.output_text == "Still here" and third.previous_response_id == second.id
        prompt = engine.requests[-1].text
        # (instructions do not carry over to the next response, as OpenAI's don't)
        turns = [("user", "Hello"), ("assistant", "Hi there"), ("user", "one"), ("user", "two"), ("user", "three")]
        turns += [("assistant", "Hi there"), ("user", "four")]
        assert prompt == "".join(f"<|im_start|>{r}\n{t}<|im_end|>\n" for r, t in turns) + "<|im_start|>assistant\n"
        # DELETE works on a response of the last run, and breaks the chains through it clearly.
        c.responses.delete(first.id)
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(first.id)
        with pytest.raises(openai.BadRequestError) as e:
            c.responses.create(model="scripted", previous_response_id=third.id, input="five")
        assert e.value.body is not None and "earlier response" in str(e.value.body)
        assert first.id in str(e.value.body)

    with serve_in_thread(ScriptedEngine(), response_store=store) as url:
        c = client(url)
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(first.id)  # the delete was kept
        assert c.responses.retrieve(third.id).output_text == "Still here"


def test_a_streamed_response_is_stored_on_disk(tmp_path: Path) -> None:
    store = tmp_path / "responses.db"
    with serve_in_thread(ScriptedEngine(), response_store=store) as url:
        events: list[Any] = list(client(url).responses.create(model="scripted", input="hi", stream=True, store=True))
        rid = events[-1].response.id
    with serve_in_thread(ScriptedEngine(), response_store=store) as url:
        assert client(url).responses.retrieve(rid).output_text == "Hello, world!"


def test_the_in_memory_store_stays_the_default(tmp_path: Path) -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        rid = client(url).responses.create(model="scripted", input="hi", store=True).id
        assert client(url).responses.retrieve(rid).id == rid
    with serve_in_thread(ScriptedEngine()) as url, pytest.raises(openai.NotFoundError):
        client(url).responses.retrieve(rid)
    assert list(tmp_path.iterdir()) == []


def test_the_byte_bound_evicts_the_least_recently_used_across_restarts(tmp_path: Path) -> None:
    store = tmp_path / "responses.db"
    # A stored response of the scripted engine counts about 1.1 KB: room for two, not three.
    opts: dict[str, Any] = {"response_store": store, "response_store_bytes": 2500}
    with serve_in_thread(ScriptedEngine(), **opts) as url:
        c = client(url)
        a = c.responses.create(model="scripted", input="a", store=True)
        b = c.responses.create(model="scripted", input="b", previous_response_id=a.id, store=True)
    with serve_in_thread(ScriptedEngine(), **opts) as url:
        c = client(url)
        c.responses.retrieve(a.id)  # now b is the least recently used
        x = c.responses.create(model="scripted", input="x", store=True)
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(b.id)
        assert c.responses.retrieve(a.id).id == a.id and c.responses.retrieve(x.id).id == x.id
        with pytest.raises(openai.NotFoundError) as e:
            c.responses.create(model="scripted", input="y", previous_response_id=b.id)
        assert "evicted" in str(e.value.body)


def test_the_age_bound_drops_old_responses_across_restarts(tmp_path: Path) -> None:
    store = tmp_path / "responses.db"
    with serve_in_thread(ScriptedEngine(), response_store=store, response_store_ttl=0.5) as url:
        c = client(url)
        old = c.responses.create(model="scripted", input="old", store=True)
        assert c.responses.retrieve(old.id).id == old.id
    time.sleep(0.6)
    with serve_in_thread(ScriptedEngine(), response_store=store, response_store_ttl=0.5) as url:
        c = client(url)
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(old.id)
        with pytest.raises(openai.NotFoundError):
            c.responses.create(model="scripted", input="again", previous_response_id=old.id)
    # Pruned from the file at start-up, not only hidden.
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT count(*) FROM responses WHERE id = ?", (old.id,)).fetchone() == (0,)
    db.close()


def start_error(store: Path) -> smgpy.ResponseStoreError:
    """The error `serve_oai_async` raises at start-up on `store`."""

    async def main() -> None:
        await smgpy.serve_oai_async(ScriptedEngine(), port=0, response_store=store, log_level="error")

    with pytest.raises(smgpy.ResponseStoreError) as e:
        asyncio.run(main())
    return e.value


def test_a_damaged_file_is_a_clear_start_up_error_and_is_left_alone(tmp_path: Path) -> None:
    store = tmp_path / "responses.db"
    junk = b"these bytes are not a SQLite database " * 100
    store.write_bytes(junk)
    e = start_error(store)
    assert isinstance(e, OSError)
    assert str(store) in str(e) and "move it aside" in str(e)
    assert store.read_bytes() == junk


def test_another_programs_database_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "app.db"
    with sqlite3.connect(store) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
        db.execute("INSERT INTO notes VALUES ('keep me')")
    db.close()
    e = start_error(store)
    assert "not a smgpy response store" in str(e) and str(store) in str(e)
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT text FROM notes").fetchall() == [("keep me",)]
    db.close()


def test_a_newer_stores_file_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "responses.db"
    with serve_in_thread(ScriptedEngine(), response_store=store) as url:
        client(url).responses.create(model="scripted", input="hi", store=True)
    with sqlite3.connect(store) as db:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        db.execute(f"PRAGMA user_version = {version + 1}")
    db.close()
    e = start_error(store)
    assert "newer smgpy" in str(e) and str(store) in str(e)


def test_cli_options() -> None:
    args = build_parser().parse_args(["serve", "--response-store", "r.db", "--response-store-ttl", "12h"])
    assert args.response_store == "r.db" and args.response_store_ttl == 12 * 3600
    args = build_parser().parse_args(["serve"])
    assert args.response_store is None and args.response_store_ttl == 30 * 86400
    assert parse_duration("90m") == 5400 and parse_duration("45") == 45 and parse_duration("0") == 0
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--response-store-ttl", "soon"])
