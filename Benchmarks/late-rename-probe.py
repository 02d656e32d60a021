#!/usr/bin/env python3
"""Probe: can a rename that a stalled smbd session still holds be fenced by name?

    scripts/setup.sh --test                    # puts smbprotocol in .venv
    BASE=/tmp/bd-probe PORT=14455 scripts/smbd.sh up
    .venv/bin/python Benchmarks/late-rename-probe.py 14455 /tmp/bd-probe
    BASE=/tmp/bd-probe PORT=14455 scripts/smbd.sh down

libsmbclient renames in two steps: it opens the source (DELETE access, every sharing mode
allowed), then sends the rename on that handle (SMB2 SET_INFO). A session stalled between the
two still holds the open handle, and the rename it carries out later follows the file, not the
name. Connection A plays that session: it opens the temporary file and keeps the handle;
connection B then fences by name (renames it aside, or marks it for deletion); then A's late
rename is sent. The last part checks what does fence it: an open of the file that allows no
sharing is refused (STATUS_SHARING_VIOLATION) while any other handle is open on it, and one that
shares reads only is refused beside a rename's handle or a writer but granted beside a reader.

Only 127.0.0.1 is contacted; files are made in the private share of the loopback smbd.
"""
import sys, uuid, os
from smbprotocol.connection import Connection
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect
from smbprotocol.open import (Open, CreateDisposition, CreateOptions, FilePipePrinterAccessMask,
    ImpersonationLevel, ShareAccess, FileAttributes)
from smbprotocol.file_info import FileRenameInformation, FileDispositionInformation, InfoType, FileInformationClass
from smbprotocol.exceptions import SMBResponseException

PORT = int(sys.argv[1]); BASE = sys.argv[2]
def connect(name):
    c = Connection(uuid.uuid4(), "127.0.0.1", PORT); c.connect()
    s = Session(c, "dropper", "s3cret", require_encryption=False); s.connect()
    t = TreeConnect(s, r"\\127.0.0.1\private"); t.connect()
    return t

def open_(tree, name, access, disp=CreateDisposition.FILE_OPEN, opts=CreateOptions.FILE_NON_DIRECTORY_FILE):
    o = Open(tree, name)
    o.create(ImpersonationLevel.Impersonation, access, FileAttributes.FILE_ATTRIBUTE_NORMAL,
             ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE,
             disp, opts)
    return o

from smbprotocol.open import SMB2SetInfoRequest, SMB2SetInfoResponse
def set_info(o, info):
    req = SMB2SetInfoRequest()
    req["info_type"] = info.INFO_TYPE
    req["file_info_class"] = info.INFO_CLASS
    req["file_id"] = o.file_id
    req["buffer"] = info
    conn = o.connection
    request = conn.send(req, sid=o.tree_connect.session.session_id, tid=o.tree_connect.tree_connect_id)
    conn.receive(request)

def rename(o, target, replace=False):
    info = FileRenameInformation(); info['replace_if_exists'] = replace; info['file_name'] = target
    set_info(o, info)

def delete(o):
    info = FileDispositionInformation(); info['delete_pending'] = True
    set_info(o, info)

# Files of an earlier run of this probe go first (it creates them exclusively).
SHARE = os.path.join(BASE, "shares", "private")
for name in os.listdir(SHARE):
    if name.startswith(("t-", "final-", "u.")):
        os.unlink(os.path.join(SHARE, name))

DEL = FilePipePrinterAccessMask.DELETE | FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES
for case in ["aside", "delete"]:
    a = connect("a"); b = connect("b")
    tmp = f"t-{case}.part"; final = f"final-{case}.txt"; aside = f"t-{case}.aside"
    o = open_(a, tmp, FilePipePrinterAccessMask.GENERIC_WRITE | FilePipePrinterAccessMask.DELETE, CreateDisposition.FILE_CREATE)
    o.write(b"hello", 0); o.close()
    late = open_(a, tmp, DEL)   # the stalled session's open, done; its SET_INFO still to come
    try:
        f = open_(b, tmp, DEL)
        if case == "aside": rename(f, aside)
        else: delete(f)
        f.close()
        print(case, "fence: ok")
    except SMBResponseException as e:
        print(case, "fence failed:", e.status)
    try:
        rename(late, final)
        print(case, "late rename: SUCCEEDED ->", sorted(os.listdir(BASE + "/shares/private")))
    except SMBResponseException as e:
        print(case, "late rename refused:", hex(e.status))
    try: late.close()
    except Exception as e: print("close", e)
    print(case, "after close:", sorted(os.listdir(BASE + "/shares/private")))

print("--- share-mode check after the aside rename")
a = connect("a"); b = connect("b")
o = open_(a, "u.part", FilePipePrinterAccessMask.GENERIC_WRITE | FilePipePrinterAccessMask.DELETE, CreateDisposition.FILE_CREATE)
o.write(b"hello", 0); o.close()
late = open_(a, "u.part", DEL)
f = open_(b, "u.part", DEL); rename(f, "u.aside"); f.close()
def exclusive(tree, name):
    x = Open(tree, name)
    x.create(ImpersonationLevel.Impersonation, FilePipePrinterAccessMask.FILE_READ_DATA | FilePipePrinterAccessMask.DELETE,
             FileAttributes.FILE_ATTRIBUTE_NORMAL, 0, CreateDisposition.FILE_OPEN, CreateOptions.FILE_NON_DIRECTORY_FILE)
    return x
try:
    x = exclusive(b, "u.aside"); print("exclusive open with the late handle open: SUCCEEDED (no protection)"); x.close()
except SMBResponseException as e:
    print("exclusive open with the late handle open: refused", hex(e.status))
late.close()
x = exclusive(b, "u.aside"); print("exclusive open after the late handle closed: ok"); x.close()

print("--- an open for reading that shares reads only, beside each kind of handle")
for name in os.listdir(SHARE):
    if name.startswith("s-"):
        os.unlink(os.path.join(SHARE, name))
a = connect("a"); b = connect("b")
o = open_(a, "s-1", FilePipePrinterAccessMask.GENERIC_WRITE, CreateDisposition.FILE_CREATE)
o.close()
EVERY = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE
kinds = {
    "a rename's handle (delete access, every sharing mode)": (DEL, EVERY),
    "a reader (read access, sharing read and write)":
        (FilePipePrinterAccessMask.FILE_READ_DATA, ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE),
    "a writer (write access, every sharing mode)": (FilePipePrinterAccessMask.FILE_WRITE_DATA, EVERY),
}
for label, (access, sharing) in kinds.items():
    held = Open(a, "s-1")
    held.create(ImpersonationLevel.Impersonation, access, FileAttributes.FILE_ATTRIBUTE_NORMAL, sharing,
                CreateDisposition.FILE_OPEN, CreateOptions.FILE_NON_DIRECTORY_FILE)
    try:
        check = Open(b, "s-1")
        check.create(ImpersonationLevel.Impersonation, FilePipePrinterAccessMask.FILE_READ_DATA,
                     FileAttributes.FILE_ATTRIBUTE_NORMAL, ShareAccess.FILE_SHARE_READ,
                     CreateDisposition.FILE_OPEN, CreateOptions.FILE_NON_DIRECTORY_FILE)
        check.close()
        print(label + ": granted")
    except SMBResponseException as e:
        print(label + ": refused", hex(e.status))
    held.close()
