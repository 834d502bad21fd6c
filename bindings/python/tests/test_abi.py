"""The load-time checks: ABI version and struct sizes against the library,
the library's search order, and that the copy under test is the installed
one (run_tests.py) with the library it was given."""

import ctypes
import os
import subprocess
import sys

import pytest

from conftest import infer

native = infer._native if infer is not None else None


def test_abi_matches():
    assert infer.abi_version() == infer.ABI_VERSION == 2
    lib = native.lib()
    for sid, name, cls in native.STRUCTS:
        assert lib.infer_struct_size(sid) == ctypes.sizeof(cls), name
    assert infer.version() == infer.__version__ == "0.25.0"


class FakeLib:
    """Stands for a CDLL: attributes are functions returning set values."""

    def __init__(self, abi, sizes):
        self.infer_abi_version = lambda: abi
        self.infer_struct_size = lambda sid: sizes.get(sid, 0)


def _sizes():
    return {sid: ctypes.sizeof(cls) for sid, _, cls in native.STRUCTS}


def test_check_abi_refuses_other_version():
    native.check_abi(FakeLib(native.ABI_VERSION, _sizes()), "fake.so")  # the right one passes
    with pytest.raises(infer.LibraryError) as e:
        native.check_abi(FakeLib(native.ABI_VERSION + 1, _sizes()), "fake.so")
    msg = str(e.value)
    assert "fake.so" in msg and "ABI version %d" % (native.ABI_VERSION + 1) in msg
    assert "version %d" % native.ABI_VERSION in msg


def test_check_abi_refuses_other_struct_size():
    sizes = _sizes()
    sizes[7] += 8  # infer_request_params grew
    with pytest.raises(infer.LibraryError) as e:
        native.check_abi(FakeLib(native.ABI_VERSION, sizes), "fake.so")
    assert "infer_request_params" in str(e.value)


def test_check_abi_refuses_library_without_it():
    with pytest.raises(infer.LibraryError) as e:
        native.check_abi(object(), "old.so")
    assert "infer_abi_version" in str(e.value)


def test_search_order(tmp_path):
    lib_name = native.library_file_names()[0]
    beside = tmp_path / "pkg"
    beside.mkdir()
    explicit = tmp_path / "explicit.so"
    explicit.write_bytes(b"")
    never = lambda name: pytest.fail("find_library must not be asked")  # noqa: E731
    # 1. INFER_LIBRARY wins, even over a copy beside the package
    (beside / lib_name).write_bytes(b"")
    assert native.locate({"INFER_LIBRARY": str(explicit)}, str(beside), never) == str(explicit)
    # ... and a wrong path is an error, not a fall-through to another copy
    with pytest.raises(infer.LibraryError) as e:
        native.locate({"INFER_LIBRARY": str(tmp_path / "nope.so")}, str(beside), never)
    assert "nope.so" in str(e.value)
    # 2. a copy beside the package
    assert native.locate({}, str(beside), never) == str(beside / lib_name)
    # 3. the system's search
    (beside / lib_name).unlink()
    assert native.locate({}, str(beside), lambda name: "libinfer.so.0" if name == "infer" else None) == "libinfer.so.0"
    # none: the message says where it looked
    with pytest.raises(infer.LibraryError) as e:
        native.locate({}, str(beside), lambda name: None)
    msg = str(e.value)
    assert "INFER_LIBRARY" in msg and str(beside / lib_name) in msg and "find_library" in msg


def test_platform_names():
    assert native.library_file_names("win32") == ["infer.dll"]
    assert native.library_file_names("darwin") == ["libinfer.dylib"]
    assert native.library_file_names("linux") == ["libinfer.so"]


def test_bad_library_path_in_a_fresh_interpreter(tmp_path):
    # the package this run imports, whatever the working directory
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(infer.__file__)))
    env = dict(os.environ, INFER_LIBRARY=str(tmp_path / "missing.so"), PYTHONPATH=pkg_parent)
    code = "import infer\ntry:\n    infer.version()\nexcept infer.LibraryError as e:\n    print(e)\n"
    out = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, timeout=60,
                         cwd=str(tmp_path)).stdout.decode()
    assert "missing.so" in out and "not a file" in out
    not_a_lib = tmp_path / "garbage.so"
    not_a_lib.write_bytes(b"not a shared library")
    env["INFER_LIBRARY"] = str(not_a_lib)
    out = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, timeout=60,
                         cwd=str(tmp_path)).stdout.decode()
    assert out.startswith("cannot load %s" % not_a_lib)


def test_under_test_is_the_installed_copy():
    """run_tests.py says where it installed the package and which library it built."""
    pkg = os.environ.get("INFER_EXPECT_PACKAGE_DIR")
    if pkg:
        assert os.path.dirname(os.path.abspath(infer.__file__)) == os.path.abspath(pkg)
    if os.environ.get("INFER_LIBRARY"):
        assert os.path.samefile(infer.library_path(), os.environ["INFER_LIBRARY"])
