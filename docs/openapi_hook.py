"""MkDocs hook (mkdocs.yml ``hooks``): puts the OpenAPI document into the
site as ``openapi.json``, built by :func:`narad.http.openapi.document_bytes`
as a node serves it, for the API reference page (api.md) to render. Never
a copy in the repository, so the page cannot describe another API."""

from __future__ import annotations

from mkdocs.structure.files import File
from mkdocs.structure.files import Files

from narad.http.openapi import document_bytes


def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, "openapi.json", content=document_bytes()))
    return files
