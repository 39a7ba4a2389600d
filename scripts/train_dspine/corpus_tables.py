"""The tables corpus.py draws its prompts from (kept apart so the logic there stays short)."""

STDLIB_MODULES = [
    "textwrap", "string", "heapq", "bisect", "shlex", "fnmatch", "glob", "posixpath", "ntpath", "colorsys",
    "calendar", "statistics", "fractions", "difflib", "html", "base64", "quopri", "uu", "csv", "json.decoder",
    "json.encoder", "urllib.parse", "email.utils", "http.cookies", "tokenize", "keyword", "copy", "functools",
    "operator", "random", "locale", "gettext", "ipaddress", "mimetypes", "filecmp", "shutil", "tempfile",
    "platform", "sysconfig", "pprint", "reprlib", "dataclasses", "enum", "inspect", "ast", "dis", "pydoc",
    "zipfile", "tarfile", "gzip", "argparse", "optparse", "configparser", "logging", "warnings", "traceback",
    "timeit", "cProfile", "pstats", "doctest", "unittest.util", "subprocess", "asyncio.base_events",
    "concurrent.futures._base", "email._header_value_parser", "xml.dom.minidom", "wave", "sndhdr",
    "imghdr", "netrc", "plistlib", "secrets", "hmac", "uuid", "numbers", "decimal", "_pydecimal", "re._parser",
    "sre_compile", "collections", "stat", "nturl2path", "pathlib", "zoneinfo._common", "graphlib", "codeop",
]  # fmt: skip

LANGUAGES = ["Python", "JavaScript", "TypeScript", "C", "C++", "Rust", "Go", "Java", "Ruby", "Kotlin", "Bash",
             "PHP", "C#", "Haskell", "Lua", "Swift"]  # fmt: skip

CODE_TASKS = [
    "returns the median of a list of numbers", "parses an ISO 8601 date string", "counts word frequencies in a text",
    "merges overlapping intervals", "checks whether brackets in a string are balanced",
    "rotates a matrix by 90 degrees",
    "finds the longest common prefix of several strings", "implements an LRU cache",
    "converts Roman numerals to integers",
    "generates all permutations of a list", "computes the Levenshtein distance of two strings", "implements a min-heap",
    "serialises a binary tree to a string and back", "finds the shortest path in a grid with BFS",
    "reads a CSV file and sums one column", "retries an HTTP request with exponential backoff",
    "validates an IPv4 address", "implements a thread-safe counter", "debounces a function call",
    "tokenises an arithmetic expression", "evaluates an expression in reverse Polish notation",
    "implements quicksort", "implements merge sort", "detects a cycle in a linked list",
    "finds all prime numbers below n with a sieve", "converts a number to its binary representation",
    "computes a SHA-256 digest of a file", "walks a directory tree and lists files by size",
    "implements a trie with insert and search", "implements Dijkstra's algorithm",
    "parses command-line flags", "formats a duration in seconds as hours, minutes and seconds",
    "implements a ring buffer", "groups records by a key and counts them", "deduplicates lines of a file",
    "implements a rate limiter with a token bucket", "computes the edit script between two lists",
    "checks whether two strings are anagrams", "implements matrix multiplication",
    "finds the k most frequent elements", "implements a simple key-value store backed by a file",
    "converts camelCase to snake_case", "pads a string to a given width", "implements run-length encoding",
    "computes the power set of a set", "implements topological sort", "implements union-find",
    "parses a URL query string into a map", "computes a moving average over a stream",
    "implements a binary search tree with deletion", "checks whether a year is a leap year",
    "generates a random password", "implements the game of life step", "finds the majority element",
    "implements a simple event emitter", "computes the nth Catalan number", "implements an iterator over a range",
    "escapes HTML special characters", "implements a bloom filter", "counts set bits in an integer",
    "implements a producer-consumer queue", "finds the maximum subarray sum", "implements a simple JSON pretty printer",
    "reverses the words of each line in a file", "implements a linked list with insert and remove",
    "computes the checksum of a credit card number with Luhn's algorithm", "converts hex colours to RGB",
]  # fmt: skip

CODE_WRITE_FORMS = [
    "Write a {lang} function that {task}.", "In {lang}, implement code that {task}. Keep it short.",
    "Give me {lang} code that {task}, with a brief comment on each part.",
    "I need a {lang} snippet that {task}. Explain the time complexity.",
    "How would you write something in {lang} that {task}?", "Write idiomatic {lang} that {task}.",
]  # fmt: skip
CODE_TEST_FORMS = [
    "Write unit tests in {lang} for a function that {task}.",
    "What edge cases should tests cover for {lang} code that {task}? Write the tests.",
    "Write a property-based test in {lang} for code that {task}.",
]  # fmt: skip
EXPLAIN_FORMS = [
    "Explain what this function does:\n```python\n{code}\n```",
    "What does `{name}` return? Walk through it line by line.\n```python\n{code}\n```",
    "Is there a bug in this code? If not, say what it does.\n```python\n{code}\n```",
    "Summarise this function in one sentence, then list its inputs and outputs.\n```python\n{code}\n```",
]  # fmt: skip

SHELL_TASKS = [
    "find all files modified in the last day", "count lines in every .py file", "replace a word in many files",
    "show the ten largest files in a folder", "kill a process listening on port 8080", "tail a log and filter errors",
    "compress a folder into a tar.gz", "list the open ports", "show disk usage per folder",
    "rename all .jpeg files to .jpg", "download a file and check its checksum", "print the environment sorted",
    "show which process uses the most memory", "create a cron job that runs every hour", "find duplicate files",
    "extract the second column of a CSV", "watch a folder for changes", "show git branches sorted by date",
    "remove trailing whitespace from files", "count unique IP addresses in an access log",
]  # fmt: skip
SHELL_FORMS = ["With a shell command,", "Write a bash one-liner to", "On Linux, how do I",
               "Give a POSIX sh script that will"]  # fmt: skip
SQL_TASKS = [
    "find customers with more than five orders", "compute monthly revenue", "find duplicate emails in a users table",
    "list employees earning more than their manager", "get the second highest salary", "count orders per day",
    "find products never ordered", "rank students by score within each class", "delete rows older than a year",
    "join orders with customers and show totals", "find the top three products per category",
    "compute a running total of sales", "pivot sales by quarter", "find gaps in a sequence of ids",
    "update prices by ten percent for one category", "create a table for blog posts with an index",
]  # fmt: skip
SQL_FORMS = ["Write an SQL query to {task}.", "In PostgreSQL, how do I {task}?", "SQLite: {task}. Show the query."]

EDIT_FAMILIES = {
    "rename": ["Rename `{name}` to `{new}` and update this code accordingly:\n```python\n{code}\n```",
               "Change the function name in this code to `{new}`:\n```python\n{code}\n```"],
    "typehints": ["Add type hints to this function:\n```python\n{code}\n```",
                  "Annotate every parameter and the return value of this code:\n```python\n{code}\n```"],
    "docstring": ["Write a docstring for this function and return the whole function:\n```python\n{code}\n```",
                  "Document `{name}` with a Google-style docstring:\n```python\n{code}\n```"],
    "refactor": ["Refactor this code to be easier to read:\n```python\n{code}\n```",
                 "Simplify `{name}` without changing its behaviour:\n```python\n{code}\n```"],
    "errors": ["Add input validation and error handling to this function:\n```python\n{code}\n```",
               "Make this function raise a clear ValueError on bad input:\n```python\n{code}\n```"],
    "logging": ["Add logging to this function so it reports what it does:\n```python\n{code}\n```",
                "Rewrite `{name}` to print each step it takes:\n```python\n{code}\n```"],
}  # fmt: skip
NEW_NAMES = ["compute", "run_step", "handle", "process_item", "transform", "do_work", "apply_rule", "convert_value",
             "build_result", "check_input", "load_entry", "render"]  # fmt: skip

MATH_FAMILIES = {
    "arithmetic": ["What is {a} times {b}?", "Compute {a} * {b} + {c}.", "What is {c} divided by {d}, to two decimals?",
                   "Add {a}, {b} and {c}, then subtract {d}.", "What is {a} squared minus {b}?"],
    "word": ["{name} buys {b} {item}s at {a} dollars each and pays with {c} dollars. What is the change?",
             "{name} reads {b} pages a day. How many days to read a {c}-page book?",
             "A box holds {d} {item}s. How many boxes for {c} {item}s?",
             "{name} earns {a} dollars an hour and works {b} hours. How much is that?"],
    "algebra": ["Solve for x: {a}x + {b} = {c}.", "Solve the system x + y = {c}, x - y = {b}.",
                "Factor x^2 + {d}x + {b}, if possible.", "Find x if {a}(x - {d}) = {c}."],
    "percent": ["What is {b} percent of {c}?", "A price of {c} dollars drops by {b} percent. What is the new price?",
                "{a} out of {c} students passed. What percentage is that?"],
    "geometry": ["A rectangle is {a} by {b} {unit}. What are its area and perimeter?",
                 "A circle has radius {d} {unit}. What is its area?",
                 "A right triangle has legs {d} and {b}. How long is the hypotenuse?"],
    "sequence": ["What is the next number: {a}, {b}, {c}, ...? Explain the pattern you assume.",
                 "Sum the integers from 1 to {c}.", "What is the {d}th term of the sequence starting {a}, {b}?"],
    "units": ["Convert {c} {unit} to meters.", "How many seconds are in {d} hours and {a} minutes?",
              "A car uses {d} litres per 100 km. How much for {c} km?"],
}  # fmt: skip
NAMES = ["Ana", "Bo", "Chen", "Dara", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jules", "Kofi", "Lena", "Mo", "Nia"]
ITEMS = ["pen", "notebook", "apple", "ticket", "book", "cup", "lamp", "shirt", "plant", "battery", "cable", "chair"]
UNITS = ["cm", "inches", "feet", "km", "yards", "mm"]

TOOLSETS = [
    'You are a coding agent. Call tools with JSON: {"tool": NAME, "args": {...}}. Tools: read_file(path), '
    "write_file(path, content), run(command), grep(pattern).",
    "You can use these functions: list_dir(path), open_file(path, start, end), edit_file(path, old, new), "
    "shell(cmd). Reply with one function call per message, as JSON.",
    'Available tools (answer {"name": ..., "arguments": {...}}): search_code(query), view(path), '
    "apply_patch(patch), run_tests(selector).",
    "<tools>read(path); write(path, text); exec(cmd); find(name)</tools> Use exactly one tool call per turn, in "
    "<call>...</call> tags with JSON inside.",
    "You are an assistant with a calculator(expression) tool and a web_search(query) tool. Call them as JSON "
    'objects {"tool": ..., "input": ...} when needed.',
]  # fmt: skip
AGENT_TASKS = [
    "List the files in the project root.", "Open config.yaml and tell me the port.",
    "Fix the failing test in tests/test_io.py.",
    "Find every use of the deprecated function old_api.", "Add a --verbose flag to cli.py.",
    "Create a .gitignore for Python.",
    "Bump the version in pyproject.toml to 2.1.0.", "Find why main.go does not compile.", "Count the TODOs in src.",
    "Run the benchmarks and report the slowest one.", "Rename module utils to helpers everywhere.",
    "Check whether the Dockerfile pins its base image.", "What does the Makefile's install target do?",
    "Replace print calls with logging in server.py.", "Add a LICENSE file with the MIT text.",
    "Find the largest file in the repository.", "How many commits touched parser.c last month?",
    "Make the test for parse_args pass.", "Show me the definition of class Session.", "What is 17% of 2,340?",
    "Look up the current Python release and tell me its version.", "Delete unused imports in app.py.",
    "Set the log level to DEBUG in settings.ini.", "Find where the HTTP timeout is configured.",
    "Write a README section on installation.", "Check that all JSON files in data/ parse.",
    "Move the helpers in misc.py into a package.", "Add a unit test for the empty-input case of tokenize.",
]  # fmt: skip
PLAN_FORMS = ["Plan the steps first, then make the first tool call:", "Think briefly, then act:",
              "Before calling a tool, say what you expect to find:"]  # fmt: skip
AGENT_DIALOGUES = [
    ("Find the function that loads the settings.", '{"tool": "grep", "args": {"pattern": "def load_settings"}}',
     "app/settings.py:40:def load_settings(path):", "Open that file around the definition."),
    ("Which tests fail?", '{"tool": "run", "args": {"command": "pytest -q"}}',
     "2 failed: test_parse_empty, test_round_trip", "Show me the first failing test."),
    ("What is in the docs folder?", '{"tool": "list_dir", "args": {"path": "docs"}}',
     "index.md install.md api.md", "Read install.md and summarise it."),
    ("Is requests installed?", '{"tool": "run", "args": {"command": "pip show requests"}}',
     "WARNING: Package(s) not found: requests", "Install it and check again."),
    ("Find the port the server listens on.", '{"tool": "grep", "args": {"pattern": "port"}}',
     "server.py:12: PORT = int(os.environ.get('PORT', 8000))", "Change the default to 9000."),
    ("How big is the data folder?", '{"tool": "run", "args": {"command": "du -sh data"}}',
     "1.2G data", "Find the three largest files in it."),
    ("Where is the class Cache defined?", '{"tool": "grep", "args": {"pattern": "class Cache"}}',
     "lib/cache.py:8:class Cache:", "Add a method clear() that empties it."),
    ("Does the build pass?", '{"tool": "run", "args": {"command": "make"}}',
     "error: undefined reference to `parse_header'", "Find where parse_header should be defined."),
    ("Read the changelog.", '{"tool": "read_file", "args": {"path": "CHANGELOG.md"}}',
     "## 1.4.0\n- faster startup\n- fix crash on empty input", "Write the entry for 1.4.1: a fix for unicode paths."),
    ("What Python version does the project need?", '{"tool": "read_file", "args": {"path": "pyproject.toml"}}',
     'requires-python = ">=3.10"', "Check which version is installed here."),
]  # fmt: skip

PROSE_FAMILIES = {
    "paragraph": ["Write a short paragraph about {topic}.", "Describe {topic} in four sentences.",
                  "What is interesting about {topic}? Answer in a paragraph."],
    "story": ["Tell a short story about {topic}.", "Write a story in which {name} discovers something about {topic}.",
              "Begin a fairy tale about {topic}."],
    "poem": ["Write a short poem about {topic}.", "Write a haiku sequence about {topic}.",
             "Write a rhyming verse about {topic}."],
    "explain": ["Explain {topic} to a ten-year-old.", "Give three facts about {topic}.",
                "What are the pros and cons of {topic}?"],
    "letter": ["Write a letter to {name} about {topic}.", "Write an email to a colleague about {topic}.",
               "Write a thank-you note that mentions {topic}."],
    "summary": ["Write a one-paragraph summary of an imagined article on {topic}.",
                "Write a product description for a {item} themed on {topic}."],
}  # fmt: skip
TOPICS = [
    "the ocean at night", "a city waking up", "the history of the bicycle", "keeping a diary", "an autumn forest",
    "honeybees", "learning the piano", "a village bakery", "the first snow", "how bridges are built", "lighthouses",
    "sleep", "a mountain railway", "neighbours", "the printing press", "a rainy library", "tides", "tomato gardens",
    "museums", "thunderstorms", "a curious cat", "firefighters", "the desert at sunrise", "why music moves people",
    "a Saturday market", "volcanoes", "the internet's early days", "coffee", "migrating birds", "glaciers",
    "public transport", "chess", "recycling", "the night sky", "old maps", "bread making", "tea ceremonies",
    "marathons", "robots in factories", "solar power", "rivers", "childhood games", "the Roman roads",
    "bees and flowers",
    "a broken clock", "street musicians", "space probes", "coral reefs", "winter sports", "fountain pens",
    "electric cars", "a lost umbrella", "languages that vanish", "the wheel", "origami", "a quiet harbour",
    "bird songs", "deep sea creatures", "weather forecasts", "working from home", "a first job", "moving house",
    "mushrooms", "kites", "postcards", "the speed of light", "ancient libraries", "clouds", "wolves", "train stations",
    "a bookshop cat", "lanterns", "vaccines", "typewriters", "sourdough", "rainforests", "the compass", "bonsai trees",
    "lightning", "the metric system", "penguins", "cartography", "the telephone", "silk roads", "hot air balloons",
    "the human heart", "a school play", "jazz", "dinosaurs", "windmills", "tidal pools", "bicycles in cities",
    "photography", "a forgotten garden", "honey", "satellites", "the alphabet", "open source software", "snowflakes",
    "a night train", "beekeepers", "a mountain hut", "wildfires", "board games", "radio", "canals", "owls",
    "the moon landing", "a lighthouse storm", "paper making", "city parks", "desert plants", "the first computers",
]  # fmt: skip
