"""`crowd worker` processes a test owns, on its database and Redis."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from crowd.settings import Settings
from tests.conftest import SECRET

CROWD = str(Path(sys.executable).with_name("crowd"))


@dataclass
class Workers:
    """`crowd worker` processes on the test's database and Redis, logging to files."""

    settings: Settings
    logs: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, count: int = 1) -> list[subprocess.Popen[bytes]]:
        env = {
            **os.environ,
            "CROWD_DATA_DIR": str(self.settings.data_dir),
            "CROWD_DATABASE_URL": self.settings.database_url,
            "CROWD_SECRET_KEY": SECRET,
            "CROWD_REDIS_URL": self.settings.redis_url or "",
            "CROWD_SWEEP_INTERVAL": "1",
            "CROWD_DELIVERY_ALLOW_PRIVATE": "1",
        }
        started = []
        for _ in range(count):
            log = (self.logs / f"worker-{len(self.processes)}.log").open("wb")
            process = subprocess.Popen([CROWD, "worker"], env=env, stdout=log, stderr=log)
            self.processes.append(process)
            started.append(process)
        return started

    def log_tail(self) -> str:
        return "\n".join(
            path.read_text(errors="replace")[-3000:] for path in sorted(self.logs.glob("*.log"))
        )

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
