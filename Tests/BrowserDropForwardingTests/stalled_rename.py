#!/usr/bin/env python3
"""A stalled smbd session's rename, held open for LateRenameTests.

    stalled_rename.py PORT SHARE USER PASSWORD FOLDER NAME READY_FIFO

Opens FOLDER/NAME on the loopback smbd as libsmbclient's rename opens its source (DELETE
access, every sharing mode allowed), writes "held" to READY_FIFO, then reads one line from
standard input:

    rename TARGET   deletes FOLDER/TARGET (the claim, as libsmbclient deletes it before its
                    second rename) and renames the handle to FOLDER/TARGET without replacing:
                    the late request. Prints "renamed" or "refused <status>".
    close           only closes the handle.

Only 127.0.0.1 is contacted. Needs smbprotocol (scripts/setup.sh --test puts it in .venv).
"""
import sys
import uuid

from smbprotocol.connection import Connection
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.file_info import FileRenameInformation
from smbprotocol.open import (CreateDisposition, CreateOptions, FileAttributes,
                              FilePipePrinterAccessMask, ImpersonationLevel, Open, ShareAccess,
                              SMB2SetInfoRequest)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

port, share, user, password, folder, name, ready = sys.argv[1:8]
connection = Connection(uuid.uuid4(), "127.0.0.1", int(port))
connection.connect()
session = Session(connection, user, password, require_encryption=False)
session.connect()
tree = TreeConnect(session, r"\\127.0.0.1\%s" % share)
tree.connect()
every_share = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE


def open_file(path, access, options=CreateOptions.FILE_NON_DIRECTORY_FILE):
    handle = Open(tree, path)
    handle.create(ImpersonationLevel.Impersonation, access, FileAttributes.FILE_ATTRIBUTE_NORMAL,
                  every_share, CreateDisposition.FILE_OPEN, options)
    return handle


handle = open_file(folder + "\\" + name,
                   FilePipePrinterAccessMask.DELETE | FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES)
with open(ready, "w") as fifo:
    fifo.write("held\n")

command = sys.stdin.readline().split()
if command and command[0] == "rename":
    target = folder + "\\" + command[1]
    try:
        claim = open_file(target, FilePipePrinterAccessMask.DELETE,
                          CreateOptions.FILE_NON_DIRECTORY_FILE | CreateOptions.FILE_DELETE_ON_CLOSE)
        claim.close()
        info = FileRenameInformation()
        info["replace_if_exists"] = False
        info["file_name"] = target
        request = SMB2SetInfoRequest()
        request["info_type"] = info.INFO_TYPE
        request["file_info_class"] = info.INFO_CLASS
        request["file_id"] = handle.file_id
        request["buffer"] = info
        sent = connection.send(request, sid=session.session_id, tid=tree.tree_connect_id)
        connection.receive(sent)
        print("renamed", flush=True)
    except SMBResponseException as error:
        print("refused %#x" % error.status, flush=True)
handle.close()
connection.disconnect()
