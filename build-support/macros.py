# BUILD-file macros shared by every package of the repo (pants.toml loads this file through
# [GLOBAL].build_file_prelude_globs; it is not an importable module).
#
# (Values at the top level must be hashable: tuples, not lists.)
#
# Every package has the same layout and the same three BUILD files:
#
#     <package>/BUILD            files(name="docs"): README.md, CHANGELOG.md, docs/ for tests
#     <package>/README.md, CHANGELOG.md
#     <package>/src/BUILD        eosink_package(...)   the library and its wheel + sdist
#     <package>/src/<module>/    the code (module = dist name with "-" -> "_")
#     <package>/tests/BUILD      eosink_tests(...)     its tests
#
# The distribution lives in src/BUILD, next to the top-level module, because that is where
# Pants' stevedore support looks for it when it makes entry points visible to tests.

SINKS_GROUP = "eosink.sinks"
# Spark streaming sources shipped with eosink (name -> "module:DataSourceClass"), registered by
# eosink.register_data_sources next to the sinks' data sources.
SOURCES_GROUP = "eosink.sources"

# Depending on a file of another distribution makes Pants write that distribution into this
# one's requirements, as "<dist>~=<version>" ([setup-py-generation] in pants.toml), e.g.
# eosink~=0.1.0, i.e. >=0.1.0,<0.2.
CORE = "packages/core/src/eosink/__init__.py:../lib"

# Spark tests start a JVM (~11 s each): the Spark tests of one package share one pytest
# process (and one session-scoped SparkSession), and all can be skipped with
# `./pants --tag=-spark test ::` (--tag is a global option: it goes before the goal).
# Shared per package, not repo-wide: pytest imports a tests/ folder's modules by their bare
# names (`from conftest import X`, `import helpers`), so one process for all packages would
# hand one package's tests another package's conftest.
SPARK_TEST_GLOBS = ("**/test_*spark*.py", "**/test_e2e_*.py")
# Tests on a standalone Spark cluster (eosink.testing.cluster: a master and two workers, ~15 s
# to start, shared by the cluster tests in one process; only tests/ has them, so CI starts one
# cluster): tagged "spark" and "cluster", so `--tag=-spark` skips them with the other Spark
# tests and `--tag=-cluster` alone.
CLUSTER_TEST_GLOBS = ("**/test_cluster_*.py",)
# Tests that need JVM artifacts (3rdparty/jvm/artifacts.txt: Delta's or Iceberg's Spark
# connector, S3A, Kafka, the JDBC driver), fetched by build-support/jvm-jars through
# eosink.testing.jvm: tagged "spark" and "jvm", each file a pytest process of its own (a
# session's spark.jars are fixed when its JVM starts, so files with other jars cannot share
# one), with the script and the pins in the sandbox. The jars themselves stay in the checkout's
# .jvm/ ([test].extra_env_vars names it): fetched once, on first use.
JVM_TEST_GLOBS = ("**/test_jvm_*.py",)
# ... and the other Sparks' environments (build-support/spark-env, 3rdparty/jvm/spark-envs.txt)
# where the reference engines built for an older Spark run (eosink.testing.reference_spark).
JVM_FETCH = (
    "build-support:jvm-jars",
    "3rdparty/jvm:artifacts",
    "build-support:spark-env",
    "3rdparty/jvm:spark-envs",
)
# Tests that build every wheel and install them as a user would (eosink's Requires-Dist against
# an allow-list; a clean venv with eosink + eosink-files from the package index runs a batch):
# one pytest process of their own (~2 min, most of it pip), tagged "install".
INSTALL_TEST_GLOBS = ("**/test_install_*.py",)

# pip's settings a clean-venv install test takes from the environment (names only: the values
# are the machine's).
PIP_ENV_VARS = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_CERT",
    "PIP_DEFAULT_TIMEOUT",
    "SSL_CERT_FILE",
    "HOME",
)

# The tools of eosink's test kit (eosink.testing: the loopback S3 server runs moto, the
# generated histories hypothesis, the conformance classes pytest). A library may import them
# in its kit modules, but no wheel may require them: a user gets them through the kit's
# "testing" extra (`pip install 'eosink[testing]'`), and every tests target gets them here.
TEST_TOOLS = (
    "3rdparty/python#pytest",
    "3rdparty/python#hypothesis",
    "3rdparty/python#moto",
    "3rdparty/python#boto3",
)


def eosink_package(
    *,
    dist,
    version,
    description,
    module=None,
    sinks=None,
    sources=None,
    scripts=None,
    dependencies=(),
    extras_require=None,
):
    """The library of a package and its distribution (wheel + sdist, ./pants package).

    dist:         distribution name, e.g. "eosink-files"
    version:      the package's version: this is the only place it is written
    description:  one line for the package index
    module:       top-level import name (default: dist with "-" replaced by "_")
    sinks:        {name: "module:Class"} entry points in the eosink.sinks group; a sink
                  package also requires eosink (a compatible range)
    sources:      {name: "module:DataSourceClass"} entry points in the eosink.sources group
                  (Spark Python data sources); likewise requires eosink
    scripts:      {command: "module:function"} console scripts, e.g. {"eosink": "eosink.cli:main"}
    dependencies: what the code needs beyond what Pants infers from its imports, e.g. the
                  store client, so that the wheel requires it from the first commit on
    extras_require: optional extras, e.g. {"testing": ["pytest>=8"]}
    """
    module = module or dist.replace("-", "_")
    package_dir = build_file_dir().parent
    requirements = list(dependencies)
    if sinks or sources:
        requirements.append(CORE)

    python_sources(
        name="lib",
        sources=[f"{module}/**/*.py"],
        dependencies=[
            ":data",
            *requirements,
            # The test kit shipped in a library (eosink.testing) imports the test tools; users
            # get them through the "testing" extra, never as runtime requirements of the wheel
            # (tests/test_install_wheels.py checks every wheel). Tests get them from
            # eosink_tests().
            *[f"!{tool}" for tool in TEST_TOOLS],
        ],
    )
    resources(
        name="data",
        sources=[f"{module}/**/*", f"!{module}/**/*.py", f"!{module}/**/*.py[cod]"],
    )
    python_distribution(
        name="dist",
        dependencies=[":lib", ":data"],
        provides=python_artifact(
            name=dist,
            version=version,
            description=description,
            python_requires=">=3.11",
            long_description_content_type="text/markdown",
            **({"extras_require": extras_require} if extras_require else {}),
        ),
        long_description_path=f"{package_dir}/README.md",
        entry_points={
            **({stevedore_namespace(SINKS_GROUP): sinks} if sinks else {}),
            **({stevedore_namespace(SOURCES_GROUP): sources} if sources else {}),
            **({"console_scripts": scripts} if scripts else {}),
        },
    )


def eosink_tests(
    *,
    discovers_sinks=False,
    dependencies=(),
    cluster_packages=(),
    install_packages=(),
    spark_timeout=None,
):
    """The tests of a package: test_*.py / *_test.py, plus conftest.py and helpers.

    discovers_sinks: tests find sinks (and sources) through the eosink.sinks (eosink.sources)
                     entry points; Pants then makes every such entry point visible to them
                     (stevedore_namespaces).
    dependencies:    what the tests need beyond what Pants infers from their imports, e.g. a
                     pytest plugin named only in a `pytest_plugins = [...]` string
    cluster_packages: packages (e.g. wheels: python_distribution targets) built before the
                     cluster tests run and placed in their sandbox; only a package that
                     names them has cluster tests (one pytest process, one cluster for all)
    install_packages: every distribution of the repo (python_distribution targets), built
                     before the install tests (INSTALL_TEST_GLOBS) run; only a package that
                     names them has install tests
    spark_timeout:   seconds for each Spark test file (default: pants.toml's timeout_default),
                     for a package whose few Spark files each start several queries
    Spark tests (SPARK_TEST_GLOBS) get the "spark" tag and share one pytest process per
    package; cluster tests (CLUSTER_TEST_GLOBS) the tags "spark" and "cluster", and another;
    JVM tests (JVM_TEST_GLOBS) the tags "spark" and "jvm", one process per file.
    """
    package_dir = build_file_dir().parent
    package = package_dir.name or "repo"
    namespaces = [SINKS_GROUP, SOURCES_GROUP] if discovers_sinks else None
    # The package's README, CHANGELOG and docs/ (files target in <package>/BUILD).
    docs = [f"{package_dir}:docs"] if str(package_dir) != "." else []
    # The kit's test tools are excluded from the libraries (TEST_TOOLS): tests get them here.
    extra = [*docs, *TEST_TOOLS, *dependencies]
    python_test_utils(
        name="utils",
        sources=["**/*.py", "!**/test_*.py", "!**/*_test.py"],
    )
    python_tests(
        name="tests",
        sources=[
            "**/test_*.py",
            "**/*_test.py",
            *[
                f"!{glob}"
                for glob in SPARK_TEST_GLOBS
                + CLUSTER_TEST_GLOBS
                + INSTALL_TEST_GLOBS
                + JVM_TEST_GLOBS
            ],
        ],
        stevedore_namespaces=namespaces,
        dependencies=extra,
    )
    python_tests(
        name="spark",
        sources=[
            *SPARK_TEST_GLOBS,
            *[f"!{glob}" for glob in CLUSTER_TEST_GLOBS + JVM_TEST_GLOBS],
        ],
        tags=["spark"],
        batch_compatibility_tag=f"spark-{package}",
        stevedore_namespaces=namespaces,
        dependencies=extra,
        **({"timeout": spark_timeout} if spark_timeout else {}),
    )
    python_tests(
        name="jvm",
        sources=list(JVM_TEST_GLOBS),
        tags=["spark", "jvm"],
        stevedore_namespaces=namespaces,
        dependencies=[*extra, *JVM_FETCH],
        # pip's settings, for build-support/spark-env
        extra_env_vars=list(PIP_ENV_VARS),
        # A cold fetch of the jars (minutes) may fall to the first file that runs.
        timeout=1200,
    )
    if install_packages:
        _install_tests(package, extra, install_packages)
    if cluster_packages:
        _cluster_tests(package, extra, namespaces, cluster_packages)


def _install_tests(package, extra, install_packages):
    """The install tests (INSTALL_TEST_GLOBS): the repo's wheels installed into a clean venv."""
    python_tests(
        name="install",
        sources=list(INSTALL_TEST_GLOBS),
        tags=["install"],
        batch_compatibility_tag=f"install-{package}",
        # the pins a clean venv installs at (pip install -c constraints.txt)
        dependencies=[*extra, "3rdparty/python:constraints"],
        # pip there reaches the package index as this machine's pip does: Pants hides pip's
        # configuration files from its processes ([subprocess-environment]), so the index,
        # its certificates and local wheel folders come through pip's variables.
        extra_env_vars=list(PIP_ENV_VARS),
        runtime_package_dependencies=list(install_packages),
        # pip resolves and downloads the third-party packages of a clean venv (pyspark is
        # one large download on a cold cache).
        timeout=900,
    )


def _cluster_tests(package, extra, namespaces, cluster_packages):
    """The cluster tests (CLUSTER_TEST_GLOBS): one pytest process, one standalone cluster."""
    python_tests(
        name="cluster",
        sources=list(CLUSTER_TEST_GLOBS),
        tags=["spark", "cluster"],
        batch_compatibility_tag=f"cluster-{package}",
        stevedore_namespaces=namespaces,
        dependencies=extra,
        runtime_package_dependencies=list(cluster_packages),
        # The timeouts of the batch's files add up (4 files: 40 min for the one process).
        timeout=600,
    )


def eosink_benchmark(*, name, entry_point, dists=(), dependencies=(), spark=False):
    """One program of a package's benchmarks/ folder (``./pants run <folder>:<name>``), beside
    that folder's python_sources(name="lib").

    entry_point:  the program, e.g. "eosink_delta_benchmarks/history.py:main"
    dists:        the packages (folder names under packages/) whose distributions the PEX
                  installs besides eosink's, e.g. ("sink-delta",): installed, not loose
                  sources, so that their eosink.sinks entry points (and with them the
                  eosink-<name> Spark data sources) are there
    dependencies: what else the program needs, e.g. the loopback S3 server's moto and boto3
    spark:        a real venv: Spark starts its Python workers with sys.executable, and they
                  must import the same packages
    """
    pex_binary(
        name=name,
        entry_point=entry_point,
        dependencies=[
            ":lib",
            "packages/core/src:dist",
            *[f"packages/{dist}/src:dist" for dist in dists],
            *dependencies,
        ],
        **({"execution_mode": "venv"} if spark else {}),
    )
