# Debian's python3-tqdm is not installed here; the converter only draws a progress bar with it.
class tqdm:
    def __init__(self, *a, **k): pass
    def update(self, *a, **k): pass
    def close(self): pass
    def __enter__(self): return self
    def __exit__(self, *a): pass
    @staticmethod
    def write(*a, **k): pass
