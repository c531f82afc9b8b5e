"""Reports of a run: one self-contained HTML page (`write_report`) read from the run directory without locking."""

from cuco.report.data import ReportError, RunData, load_run
from cuco.report.html import REPORT_FILE, render, write_report

__all__ = ["REPORT_FILE", "ReportError", "RunData", "load_run", "render", "write_report"]
