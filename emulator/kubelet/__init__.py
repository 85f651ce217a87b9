"""The member emulator's kubelet streams: pods/exec, pods/attach and pods/portforward."""
