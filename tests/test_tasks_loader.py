"""load_tasks: the built-in suite's filters and SWE-bench-format task files."""

import json

import pytest

from ac_env.tasks import GroundTruth, Task, TaskFileError, load_tasks
from ac_env.tasks import model as task_model
from ac_env.tasks.synthetic.suite import plan_suite

ROW = {
    "instance_id": "octo__widgets-101",
    "repo": "octo/widgets",
    "problem_statement": "Widgets overflow.",
    "patch": "diff --git a/w.py b/w.py\n",
    "FAIL_TO_PASS": ["tests/test_w.py::test_overflow"],
    "PASS_TO_PASS": [],
    "base_commit": "abc123",
}


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_model_classes_are_re_exported():
    assert Task is task_model.Task and GroundTruth is task_model.GroundTruth


def test_jsonl_accepts_json_encoded_test_lists(tmp_path):
    encoded = {**ROW, "FAIL_TO_PASS": json.dumps(ROW["FAIL_TO_PASS"]), "PASS_TO_PASS": "[]"}
    (task,) = load_tasks(write_jsonl(tmp_path / "tasks.jsonl", [encoded]))
    assert task.FAIL_TO_PASS == ["tests/test_w.py::test_overflow"]
    assert task.split == "swe-bench"


def test_error_names_file_line_and_field(tmp_path):
    rows = [
        ROW,
        {**ROW, "instance_id": "octo__widgets-102"},
        {**ROW, "instance_id": "octo__widgets-103", "FAIL_TO_PASS": 7},
    ]
    path = write_jsonl(tmp_path / "tasks.jsonl", rows)
    with pytest.raises(
        TaskFileError,
        match=r"tasks\.jsonl:3: FAIL_TO_PASS: Input should be a "
        r"valid list",
    ):
        load_tasks(path)


def test_missing_field_is_named(tmp_path):
    row = {key: value for key, value in ROW.items() if key != "problem_statement"}
    with pytest.raises(TaskFileError, match=r":1: problem_statement: Field required"):
        load_tasks(write_jsonl(tmp_path / "tasks.jsonl", [row]))


def test_invalid_json_line_is_named(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(ROW) + "\n\n{not json\n")
    with pytest.raises(TaskFileError, match=r"tasks\.jsonl:3: invalid JSON"):
        load_tasks(str(path))


def test_json_list_reports_the_line_a_row_starts_on(tmp_path):
    good = json.dumps(ROW, indent=1)
    bad = json.dumps({**ROW, "instance_id": "x-2", "PASS_TO_PASS": "not a list"}, indent=1)
    path = tmp_path / "tasks.json"
    path.write_text(f"[\n{good},\n{bad}\n]\n")
    first_line_of_bad = 2 + good.count("\n") + 1
    with pytest.raises(TaskFileError, match=rf"tasks\.json:{first_line_of_bad}: PASS_TO_PASS"):
        load_tasks(str(path))


def test_json_list_loads(tmp_path):
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([ROW, {**ROW, "instance_id": "octo__widgets-102"}]))
    assert [t.instance_id for t in load_tasks(str(path))] == [
        "octo__widgets-101",
        "octo__widgets-102",
    ]


def test_duplicate_ids_are_refused(tmp_path):
    with pytest.raises(TaskFileError, match=r":2: instance_id: 'octo__widgets-101' already"):
        load_tasks(write_jsonl(tmp_path / "tasks.jsonl", [ROW, ROW]))


def test_wrong_suffix_is_refused(tmp_path):
    with pytest.raises(TaskFileError, match="expected a .jsonl or .json"):
        load_tasks(str(tmp_path / "tasks.csv"))


def test_file_filters_keep_given_order(tmp_path):
    rows = [{**ROW, "instance_id": f"octo__widgets-{n}"} for n in range(3)]
    path = write_jsonl(tmp_path / "tasks.jsonl", rows)
    picked = load_tasks(path, task_ids=["octo__widgets-2", "octo__widgets-0"])
    assert [t.instance_id for t in picked] == ["octo__widgets-2", "octo__widgets-0"]
    with pytest.raises(ValueError, match="valid ids: octo__widgets-0, octo__widgets-1"):
        load_tasks(path, task_ids=["octo__widgets-9"])
    with pytest.raises(ValueError, match="valid splits: swe-bench"):
        load_tasks(path, split="easy")


def test_builtin_unknown_split_lists_valid_ones():
    valid = "valid splits: easy, medium, hard, context-stress, impossible"
    with pytest.raises(ValueError, match=valid):
        load_tasks(split="unheard-of")


def test_builtin_unknown_task_id_lists_valid_ones():
    with pytest.raises(ValueError, match=r"valid ids: synthetic__"):
        load_tasks(task_ids=["synthetic__nope-easy-train-1"])


def test_builtin_task_ids_keep_given_order(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOCOMPACT_CACHE", str(tmp_path))
    plans = plan_suite()
    wanted = [plans[-1].instance_id, plans[0].instance_id]
    tasks = load_tasks(task_ids=wanted)
    assert [t.instance_id for t in tasks] == wanted
    assert all(t.snapshot_dir is not None and t.snapshot_dir.is_dir() for t in tasks)


def test_builtin_split_and_subset_filters():
    plans = plan_suite()
    hard_eval = [p for p in plans if p.split == "hard" and p.subset == "eval"]
    assert hard_eval
    ids = {p.instance_id for p in hard_eval}
    assert all(i.startswith("synthetic__") and "-hard-eval-" in i for i in ids)
    with pytest.raises(ValueError, match="valid subsets: train, eval"):
        load_tasks(subset="test")
