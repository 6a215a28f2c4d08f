"""Fetching a workflow run's `gpu-regression-results` artifact and reading its `results.json`.

The artifact download answers with a redirect to short-lived signed storage: the token goes to
the API only, never to the redirect target. Sizes are bounded before anything is decompressed.
Every failure raises `ArtifactError` with a message fit for the PR summary.
"""

from __future__ import annotations

import io
import logging
import time
import zipfile
import zlib
from typing import Any

import requests

from reviewbot.results import RegressionResults
from reviewbot.service.github_api import GitHub, GitHubFailed

logger = logging.getLogger(__name__)

ARTIFACT_NAME = "gpu-regression-results"
RESULTS_FILE = "results.json"
MAX_ARTIFACT_BYTES = 512 * 1024 * 1024
MAX_RESULTS_BYTES = 32 * 1024 * 1024
REDIRECTS = (301, 302, 303, 307, 308)


class ArtifactError(Exception):
    """The run's results could not be obtained or read; the message says why, for the summary."""


def find_artifact(gh: GitHub, repo: Any, run_id: int) -> Any:
    """The run's results artifact (PyGithub `Artifact`)."""
    try:
        run = gh.call("get_workflow_run", lambda: repo.get_workflow_run(run_id))
    except GitHubFailed as exc:
        raise ArtifactError(f"the run could not be read: GitHub answered {exc.status}") from exc
    try:
        artifacts = gh.call("list_run_artifacts", lambda: list(run.get_artifacts()))
    except GitHubFailed as exc:
        raise ArtifactError(f"the run's artifacts could not be listed: GitHub answered {exc.status}") from exc
    for artifact in artifacts:
        if artifact.name == ARTIFACT_NAME:
            if artifact.expired:
                raise ArtifactError(f"the run's `{ARTIFACT_NAME}` artifact has expired")
            if artifact.size_in_bytes > MAX_ARTIFACT_BYTES:
                raise ArtifactError(f"the `{ARTIFACT_NAME}` artifact is {artifact.size_in_bytes} bytes, over the limit")
            return artifact
    names = ", ".join(a.name for a in artifacts) or "none"
    raise ArtifactError(f"the run uploaded no `{ARTIFACT_NAME}` artifact (artifacts: {names})")


def _get(url: str, headers: dict[str, str], timeout: float) -> requests.Response:
    response = requests.get(url, headers=headers, timeout=timeout, allow_redirects=False, stream=True)
    declared = response.headers.get("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_ARTIFACT_BYTES:
        response.close()
        raise ArtifactError(f"artifact download of {declared} bytes is over the limit")
    return response


def download_zip(gh: GitHub, url: str) -> bytes:
    """GET the artifact's `archive_download_url`, following one redirect without credentials.

    5xx answers and connection errors are retried with the service's backoff settings."""
    settings = gh.settings
    api_headers = {"Authorization": f"Bearer {gh.token}", "Accept": "application/vnd.github+json"}
    last = ""
    for attempt in range(settings.retry_max_attempts):
        try:
            response = _get(url, api_headers, settings.github_timeout_seconds)
            if response.status_code in REDIRECTS:
                location = response.headers.get("Location")
                if not location:
                    raise ArtifactError("artifact download redirected without a Location")
                response = _get(location, {}, settings.github_timeout_seconds)
            if response.status_code == 200:
                return response.content
            last = f"HTTP {response.status_code}"
            if response.status_code < 500:
                raise ArtifactError(f"artifact download failed: {last} {response.text[:200]}")
        except (requests.ConnectionError, requests.Timeout) as exc:
            last = f"{type(exc).__name__}: {exc}"
        wait = settings.retry_backoff_seconds * 2**attempt
        logger.warning("artifact download: %s, retrying in %.2fs", last, wait)
        time.sleep(wait)
    raise ArtifactError(f"artifact download failed after {settings.retry_max_attempts} attempts: {last}")


def read_results(zip_bytes: bytes) -> RegressionResults:
    """`results.json` from the artifact zip (at its top level, as upload-artifact stores a directory)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(zip_bytes))
    except zipfile.BadZipFile as exc:
        raise ArtifactError(f"the artifact is not a zip archive: {exc}") from exc
    with archive:
        try:
            info = archive.getinfo(RESULTS_FILE)
        except KeyError as exc:
            names = ", ".join(archive.namelist()[:10]) or "nothing"
            raise ArtifactError(f"the artifact holds no {RESULTS_FILE} (it has: {names})") from exc
        if info.file_size > MAX_RESULTS_BYTES:
            raise ArtifactError(f"{RESULTS_FILE} is {info.file_size} bytes, over the limit")
        try:
            data = archive.read(info)
        except (zipfile.BadZipFile, zlib.error) as exc:
            raise ArtifactError(f"{RESULTS_FILE} in the artifact is corrupt: {exc}") from exc
    try:
        return RegressionResults.loads(data)
    except ValueError as exc:
        raise ArtifactError(f"{RESULTS_FILE} is not a valid results file: {exc}") from exc


def fetch_results(gh: GitHub, repo: Any, run_id: int) -> RegressionResults:
    artifact = find_artifact(gh, repo, run_id)
    return read_results(download_zip(gh, artifact.archive_download_url))
