#!/bin/bash
grep -cx pixel /app/batch.lst > /app/final.txt
