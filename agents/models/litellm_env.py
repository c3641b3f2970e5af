"""litellm's settings that it reads from the environment at import: imported before litellm.

Each stays the user's to override (set in the environment first). (`agents/__init__.py` sets
the one every process needs, the local price list, before anything of Baton's is imported.)
"""

import os

# litellm copies every conversation with base64 images cut short for its logging callbacks, at
# every call. Baton registers none: 0 skips the copy (an agent holding a conversation of 5,000
# messages spent a tenth of its CPU there).
os.environ.setdefault("MAX_BASE64_LENGTH_FOR_LOGGING", "0")
