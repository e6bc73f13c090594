"""Package configuration (dpppl.config): the persistent compilation cache."""


import jax



def test_compilation_cache_is_on_unless_turned_off():
    """Compiled kernels go to the persistent cache named by DPPPL_COMPILATION_CACHE; 'off' turns it off."""
    import os
    import subprocess
    import sys

    assert jax.config.jax_compilation_cache_dir == os.environ["DPPPL_COMPILATION_CACHE"]
    show = "import dpppl, jax; print(jax.config.jax_compilation_cache_dir)"
    off = subprocess.run([sys.executable, "-c", show], capture_output=True, text=True, check=True,
                         env={**os.environ, "DPPPL_COMPILATION_CACHE": "off"})
    assert off.stdout.strip() == "None"

