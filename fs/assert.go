package fs

import gofs "github.com/hanwen/go-fuse/v2/fs"

// The operations each node and handle type serves, checked at compile
// time. Node inherits the rest (getattr, readlink, statfs, ...) from
// go-fuse's LoopbackNode.
var (
	_ = (gofs.NodeOnAdder)((*Node)(nil))
	_ = (gofs.NodeLookuper)((*Node)(nil))
	_ = (gofs.NodeOpendirHandler)((*Node)(nil))
	_ = (gofs.NodeOpener)((*Node)(nil))
	_ = (gofs.NodeCreater)((*Node)(nil))
	_ = (gofs.NodeTmpfiler)((*Node)(nil))
	_ = (gofs.NodeMkdirer)((*Node)(nil))
	_ = (gofs.NodeMknoder)((*Node)(nil))
	_ = (gofs.NodeSymlinker)((*Node)(nil))
	_ = (gofs.NodeLinker)((*Node)(nil))
	_ = (gofs.NodeRmdirer)((*Node)(nil))
	_ = (gofs.NodeUnlinker)((*Node)(nil))
	_ = (gofs.NodeRenamer)((*Node)(nil))
	_ = (gofs.NodeSetattrer)((*Node)(nil))
	_ = (gofs.NodeGetattrer)((*Node)(nil))
	_ = (gofs.NodeGetxattrer)((*Node)(nil))
	_ = (gofs.NodeSetxattrer)((*Node)(nil))
	_ = (gofs.NodeRemovexattrer)((*Node)(nil))
	_ = (gofs.NodeListxattrer)((*Node)(nil))
	_ = (gofs.NodeCopyFileRanger)((*Node)(nil))
	_ = (gofs.NodeStatfser)((*Node)(nil))
	_ = (gofs.NodeReadlinker)((*Node)(nil))

	_ = (gofs.FileReader)((*handle)(nil))
	_ = (gofs.FileWriter)((*handle)(nil))
	_ = (gofs.FileFlusher)((*handle)(nil))
	_ = (gofs.FileFsyncer)((*handle)(nil))
	_ = (gofs.FileReleaser)((*handle)(nil))
	_ = (gofs.FileGetattrer)((*handle)(nil))
	_ = (gofs.FileSetattrer)((*handle)(nil))
	_ = (gofs.FileLseeker)((*handle)(nil))
	_ = (gofs.FileAllocater)((*handle)(nil))

	_ = (gofs.FilePassthroughFder)((*passthroughHandle)(nil))
	_ = (gofs.FileReleaser)((*passthroughHandle)(nil))
	_ = (gofs.FileFsyncer)((*passthroughHandle)(nil))
	_ = (gofs.FileWriter)((*passthroughHandle)(nil))
	_ = (gofs.FileSetattrer)((*passthroughHandle)(nil))
	_ = (gofs.FileAllocater)((*passthroughHandle)(nil))

	_ = (gofs.FileReaddirenter)((*listDir)(nil))
	_ = (gofs.FileSeekdirer)((*listDir)(nil))

	_ = (gofs.NodeGetattrer)((*snapshotsDir)(nil))
	_ = (gofs.NodeReaddirer)((*snapshotsDir)(nil))
	_ = (gofs.NodeLookuper)((*snapshotsDir)(nil))
	_ = (gofs.NodeMkdirer)((*snapshotsDir)(nil))
	_ = (gofs.NodeCreater)((*snapshotsDir)(nil))
	_ = (gofs.NodeSetattrer)((*snapshotsDir)(nil))
)
