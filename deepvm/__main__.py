from deepvm.cli import run

run()
